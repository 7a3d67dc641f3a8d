"""``mdrecall doctor``: the findings of :mod:`mdrecall.doctor`, printed with their fixes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

Run = Callable[..., tuple[int, str, str]]


def test_healthy_empty_and_broken(tmp_path: Path, mdrecall: Run) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# M\n- fact\n", encoding="utf-8")
    assert mdrecall("index", "-w", str(ws), "-c", "provider=none", "-q")[0] == 0
    code, out, _ = mdrecall("doctor", "-w", str(ws), "-c", "provider=none")
    assert code == 0 and "ok: nothing needs attention" in out and "keyword-only" in out and "fix: " in out
    code, out, _ = mdrecall("doctor", "-w", str(ws), "-c", "provider=none", "--json")
    data = json.loads(out)
    assert data["ok"] is True and data["packages"]["apsw"] and data["files"] == 1
    assert {f["state"] for f in data["findings"]} <= {"keyword-only", "mcp-missing"}

    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, _ = mdrecall("doctor", "-w", str(empty), "-c", "provider=none")
    assert code == 1 and "[empty-workspace]" in out and "mdrecall init" in out and "[index-missing]" in out

    (ws / ".mdrecall.yaml").write_text("query: {maxResults: 0}\n", encoding="utf-8")
    code, out, _ = mdrecall("doctor", "-w", str(ws), "--json")
    data = json.loads(out)
    assert code == 1 and data["findings"][0]["state"] == "open-failed" and "query.maxResults" in data["findings"][0]["message"]
