"""``mdrecall init`` and ``mdrecall gc``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from mdrecall.cli.workspace import config_template
from mdrecall.config import MemoryConfig, parse_config

Run = Callable[..., tuple[int, str, str]]


def test_init_writes_a_skeleton_and_keeps_what_exists(tmp_path: Path, mdrecall: Run) -> None:
    ws = tmp_path / "agent"
    code, out, _ = mdrecall("init", str(ws))
    assert code == 0 and "created memory/, MEMORY.md, .mdrecall.yaml" in out and "mdrecall remember" in out
    assert (ws / "memory").is_dir() and (ws / "MEMORY.md").read_text(encoding="utf-8").startswith("# Memory")
    (ws / "MEMORY.md").write_text("# Mine\n", encoding="utf-8")
    code, out, _ = mdrecall("init", "-w", str(ws), "--json")
    data = json.loads(out)
    assert code == 0 and data["created"] == [] and sorted(data["kept"]) == [".mdrecall.yaml", "MEMORY.md", "memory/"]
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == "# Mine\n"
    # The new workspace works at once: its config is valid and a search explains the empty index.
    assert mdrecall("config", "validate", "-w", str(ws))[0] == 0
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert mdrecall("init", str(tmp_path / "file"))[0] == 2


def test_config_template_shows_the_defaults() -> None:
    text = config_template()
    assert parse_config(yaml.safe_load(text) or {}) == MemoryConfig()  # all commented out: defaults
    uncommented = "\n".join(line[2:] if line.startswith("# ") else line for line in text.splitlines() if not line.startswith("##"))
    assert parse_config(yaml.safe_load(uncommented)) == MemoryConfig()  # every value shown is the default


def test_gc_removes_indexes_of_deleted_workspaces_only(tmp_path: Path, mdrecall: Run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    monkeypatch.setenv("MDRECALL_HOME", str(home))
    alive, gone = tmp_path / "alive", tmp_path / "gone"
    for ws in (alive, gone):
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text("# M\n- fact\n", encoding="utf-8")
        assert mdrecall("index", "-w", str(ws), "-c", "provider=none", "-q")[0] == 0
    (home / "index" / "stray.sqlite").write_bytes(b"not an index")  # unknown owner: kept
    indexes = sorted(p.name for p in (home / "index").glob("*.sqlite"))
    assert len(indexes) == 3
    shutil.rmtree(gone)

    code, out, _ = mdrecall("gc", "--dry-run", "--json")
    data = json.loads(out)
    assert code == 0 and [Path(r["workspace"]).name for r in data["removed"]] == ["gone"]
    assert len(list((home / "index").glob("*.sqlite"))) == 3  # a dry run removes nothing

    code, out, err = mdrecall("gc")
    assert code == 0 and "removed 1 index(es)" in out and "stray.sqlite" in err
    left = sorted(p.name for p in (home / "index").iterdir())
    assert not any(name.startswith("gone-") for name in left)
    assert any(name.startswith("alive-") and name.endswith(".sqlite") for name in left) and "stray.sqlite" in left
    assert mdrecall("search", "fact", "-w", str(alive), "-c", "provider=none", "--format", "files")[1].strip() == "MEMORY.md"
