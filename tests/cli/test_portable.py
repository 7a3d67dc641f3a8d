"""``mdrecall export`` / ``mdrecall import``: the documented round trip through a file and a pipe."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .conftest import subprocess_env

Run = Callable[..., tuple[int, str, str]]


def test_export_to_a_file_import_from_a_pipe(tmp_path: Path, mdrecall: Run) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "memory").mkdir(parents=True)
    (src / "MEMORY.md").write_text("# M\n- Postgres is the database.\n", encoding="utf-8")
    (src / "memory" / "2026-01-05.md").write_text("# 2026-01-05\n- The importer crashed.\n", encoding="utf-8")
    dst.mkdir()
    out_file = tmp_path / "memories.jsonl"
    code, _, err = mdrecall("export", "-w", str(src), "-c", "provider=none", "-o", str(out_file))
    assert code == 0 and "exported 2 file(s)" in err and out_file.is_file()
    env = subprocess_env(tmp_path / "home")
    piped = subprocess.run([sys.executable, "-m", "mdrecall", "import", "-w", str(dst), "-c", "provider=none", "--json"],
                           input=out_file.read_text(encoding="utf-8"), capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert sorted(json.loads(piped.stdout)["written"]) == ["MEMORY.md", "memory/2026-01-05.md"]
    assert (dst / "MEMORY.md").read_bytes() == (src / "MEMORY.md").read_bytes()
    code, out, _ = mdrecall("search", "importer", "-w", str(dst), "-c", "provider=none", "--format", "files")
    assert out.strip() == "memory/2026-01-05.md"

    (dst / "MEMORY.md").write_text("# M\n- changed here\n", encoding="utf-8")
    code, _, err = mdrecall("import", str(out_file), "-w", str(dst), "-c", "provider=none")
    assert code == 1 and "kept MEMORY.md" in err and "changed here" in (dst / "MEMORY.md").read_text(encoding="utf-8")
    assert mdrecall("import", str(out_file), "-w", str(dst), "-c", "provider=none", "--overwrite")[0] == 0

    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("\n".join(out_file.read_text(encoding="utf-8").splitlines()[:-1]), encoding="utf-8")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    code, _, err = mdrecall("import", str(truncated), "-w", str(fresh), "-c", "provider=none")
    assert code == 1 and "truncated" in err and list(fresh.iterdir()) == []
