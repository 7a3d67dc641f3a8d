"""``mdrecall remember``: written, indexed, found by the next search (each as its own process)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .conftest import run_process

Run = Callable[..., tuple[int, str, str]]


def test_remember_then_search_in_separate_processes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    done = run_process(home, "remember", "-w", str(ws), "-c", "provider=none", "The wifi in the Lisbon office is called Tagus-5G.")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("created memory/") and "#L3" in done.stdout
    found = run_process(home, "search", "-w", str(ws), "-c", "provider=none", "-c", "sync.onSearch=false", "Lisbon wifi", "--json")
    assert found.returncode == 0, found.stderr
    hit = json.loads(found.stdout)["results"][0]
    assert hit["path"].startswith("memory/") and "Tagus-5G" in hit["snippet"]
    got = run_process(home, "get", "-w", str(ws), "-c", "provider=none", hit["citation"])
    assert "Tagus-5G" in got.stdout and "mdrecall:remembered" in got.stdout and "via=cli" in got.stdout


def test_options_and_errors(tmp_path: Path, mdrecall: Run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import io

    ws = tmp_path / "ws"
    ws.mkdir()
    common = ["-w", str(ws), "-c", "provider=none"]
    code, out, _ = mdrecall("remember", *common, "Durable fact", "--target", "MEMORY.md", "--json", "--no-index")
    data = json.loads(out)
    assert code == 0 and data["path"] == "MEMORY.md" and "indexed" not in data
    monkeypatch.setattr("sys.stdin", io.StringIO("from standard input\n"))
    code, out, _ = mdrecall("remember", *common, "-", "--now", "2026-02-03T10:00:00Z", "--json")
    data = json.loads(out)
    assert code == 0 and data["path"] == "memory/2026-02-03.md" and data["indexed"] is True
    code, _, err = mdrecall("remember", *common, "token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "--no-index")
    assert code == 0 and "1 secret(s) redacted" in err
    assert mdrecall("remember", *common, "   ")[0] == 2
    code, _, err = mdrecall("remember", *common, "x", "--target", "../x.md")
    assert code == 1 and "[invalid_path]" in err
