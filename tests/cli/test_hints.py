"""Every hint a command prints runs as printed: from another directory it still acts on the same
workspace (``-w``) with the same overrides (``-c``), never on the current directory."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from .conftest import subprocess_env


def _run(line: str | list[str], home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    words = shlex.split(line) if isinstance(line, str) else line
    assert words[0] == "mdrecall", words
    return subprocess.run([sys.executable, "-m", "mdrecall", *words[1:]], capture_output=True, text=True,
                          env=subprocess_env(home), cwd=cwd, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


def _hint(text: str, pattern: str) -> str:
    found = re.search(pattern, text)
    assert found, text
    return found.group(1)


def test_hints_run_as_printed_from_elsewhere(tmp_path: Path) -> None:
    ws, elsewhere, home = tmp_path / "agent ws", tmp_path / "elsewhere", tmp_path / "home"
    (ws / "memory").mkdir(parents=True)
    elsewhere.mkdir()
    (ws / "MEMORY.md").write_text("# Memory\n\n- The door code is 4417.\n- Redis is the cache.\n", encoding="utf-8")
    common = ["-w", str(ws), "-c", "provider=none"]

    # status: "not indexed yet — run `mdrecall index ...`"
    status = _run(["mdrecall", "status", *common], home, elsewhere)
    index = _hint(status.stdout, r"run `(mdrecall index[^`]*)`")
    assert _run(index, home, elsewhere).returncode == 0
    assert not (elsewhere / "MEMORY.md").exists() and "freshness: clean" in _run(["mdrecall", "status", *common], home, elsewhere).stdout

    # get: "… more below: mdrecall get MEMORY.md --from 3 ..."
    got = _run(["mdrecall", "get", *common, "MEMORY.md", "--lines", "2"], home, elsewhere)
    more = _run(_hint(got.stderr, r"more below: (mdrecall get .*)"), home, elsewhere)
    assert more.returncode == 0 and more.stdout.startswith("- The door code is 4417."), more

    # forget: "to forget exactly these lines: mdrecall forget ... --confirm TOKEN ... (or --yes)"
    asked = _run(["mdrecall", "forget", *common, "MEMORY.md#L4"], home, elsewhere)
    assert asked.returncode == 1
    done = _run(_hint(asked.stderr, r"these lines: (mdrecall forget .*) \(or --yes\)"), home, elsewhere)
    assert done.returncode == 0, done.stderr
    assert "Redis" not in (ws / "MEMORY.md").read_text(encoding="utf-8")

    # index of an empty workspace: "`mdrecall init ...` writes a skeleton"
    empty = tmp_path / "empty ws"
    empty.mkdir()
    indexed = _run(["mdrecall", "index", "-w", str(empty), "-c", "provider=none"], home, elsewhere)
    init = _run(_hint(indexed.stderr, r"`(mdrecall init[^`]*)` writes a skeleton"), home, elsewhere)
    assert init.returncode == 0 and (empty / "MEMORY.md").is_file() and not (elsewhere / "memory").exists()
