"""Run the examples in the docs as written.

Marker convention (fenced code blocks, the info string after the language):

* ```` ```bash test ```` — run, in order, in one ``bash -euo pipefail`` per document. A command
  that is meant to fail says so at the end of its line: ``... # exit 1`` (any text may follow).
* ```` ```python test ```` — run with the same environment's ``python`` at that point of the script.
* ```` ```bash norun ```` — shown, not run (installers, servers that never exit, the demo); every
  bash block must be one or the other, so nothing is left untested by accident.

The script runs in a scratch folder holding a copy of ``examples/`` (so ``-w examples/workspace``
works), with its own ``MDRECALL_HOME`` whose config says ``provider: none``: the results do not
depend on which extras the environment has, and no model loads. ``HOME`` is a folder of the scratch
space too, so a doc that connects a host (``mdrecall connect claude-code`` writes ``~/.claude.json``)
edits its own copy, never the machine's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
EXPECT = re.compile(r"#\s*exit (\d+)\b")


@dataclass(frozen=True)
class Block:
    lang: str
    tags: tuple[str, ...]
    body: str
    line: int


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [
        Block(m.group(1), tuple(m.group(2).split()), m.group(3), text.count("\n", 0, m.start()) + 1)
        for m in FENCE.finditer(text)
    ]


def script(path: Path) -> str:
    """The document's ``test`` blocks as one bash script."""
    out = [f"# from {path.relative_to(ROOT)}"]
    for n, block in enumerate(b for b in blocks(path) if "test" in b.tags):
        out.append(f"echo '>>> {path.name}:{block.line}' >&2")
        if block.lang == "python":
            out.append(f"python - <<'MDRECALL_PY_{n}'\n{block.body}MDRECALL_PY_{n}")
            continue
        for number, line in enumerate(block.body.splitlines(), block.line + 1):
            expected = EXPECT.search(line)
            if expected and line.strip() and not line.lstrip().startswith("#"):
                code = expected.group(1)
                out.append(f"set +e; {line}\nrc=$?; set -e\n"
                           f"[ $rc -eq {code} ] || {{ echo \"{path.name}:{number}: expected exit {code}, got $rc\" >&2; exit 1; }}")  # fmt: skip
            else:
                out.append(line)
    return "\n".join(out) + "\n"


def run(path: Path, bin_dir: Path, scratch: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``path``'s test blocks with ``bin_dir`` first on PATH, in ``scratch``."""
    scratch.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "examples", scratch / "examples", dirs_exist_ok=True)
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text("provider: none\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith(("MDRECALL_", "VIRTUAL_ENV"))}
    user = scratch / "user"
    user.mkdir(exist_ok=True)
    env = {k: v for k, v in env.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "APPDATA")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", MDRECALL_HOME=str(home), PYTHONIOENCODING="utf-8",
               HOME=str(user))  # fmt: skip
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script(path)], cwd=scratch, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
