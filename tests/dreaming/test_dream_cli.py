"""The review flow from the command line: list, explain, stage, edit the queue, approve, apply; dream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dreamhelpers import at, hit

from mdrecall.cli import main
from mdrecall.dreaming import record_recalls
from mdrecall.dreaming.paths import queue_path

CFG = {"timezone": "UTC"}
NOW = "2026-03-04T23:00:00Z"
PG = "Postgres 16 runs on db-2, port 5433."


@pytest.fixture
def recalled(workspace: Path) -> Path:
    (workspace / ".mdrecall.yaml").write_text("memory:\n  provider: none\n  dreaming:\n    timezone: UTC\n", encoding="utf-8")
    for day, query in enumerate(["postgres port", "which port does postgres listen on", "postgres on db-2"]):
        record_recalls(workspace, query, [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=day), config=CFG)
    record_recalls(workspace, "acme delivery date", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(days=2), config=CFG)
    return workspace


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_review_flow(recalled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(recalled)
    code, out, _ = run(capsys, "promote", "-w", ws, "--now", NOW)
    assert code == 0 and "1 candidate(s) pass" in out and PG in out and "Acme" not in out
    code, out, _ = run(capsys, "promote", "-w", ws, "--now", NOW, "--json")
    (candidate,) = json.loads(out)
    ident = candidate["id"]
    assert candidate["passed"] and set(candidate["components"]) == {
        "frequency", "relevance", "diversity", "recency", "consolidation", "conceptual"}

    code, out, _ = run(capsys, "promote", "-w", ws, "--now", NOW, "--explain", ident[:6])
    assert code == 0
    for part in ("frequency", "0.24", "relevance", "consolidation", "verdict:   passes every threshold"):
        assert part in out
    code, out, _ = run(capsys, "promote", "-w", ws, "--now", NOW, "--all")
    assert "not promoted: recalls 1 < minRecallCount 3" in out

    code, out, _ = run(capsys, "promote", "-w", ws, "--now", NOW, "--stage")
    assert code == 0 and "staged 1 new candidate(s) in memory/.dreams/promotion-queue.md" in out
    queue = queue_path(recalled)
    text = queue.read_text(encoding="utf-8")
    assert f"- [ ] Infra: {PG}" in text
    # A person approves it and rewrites it in their own words.
    queue.write_text(text.replace(f"- [ ] Infra: {PG}", "- [x] Main database: Postgres 16 on db-2 (port 5433)."),
                     encoding="utf-8")
    code, out, _ = run(capsys, "promote", "-w", ws, "--now", NOW, "--apply")
    assert code == 0 and "wrote 1 fact(s) to MEMORY.md" in out
    memory = (recalled / "MEMORY.md").read_text(encoding="utf-8")
    assert "- Main database: Postgres 16 on db-2 (port 5433). <!-- mdrecall:promoted id=" in memory
    assert "source=memory/2026-03-02.md:6-6" in memory
    # Re-running changes nothing.
    code, out, _ = run(capsys, "promote", "-w", ws, "--now", NOW, "--apply", "--stage")
    assert code == 0 and (recalled / "MEMORY.md").read_text(encoding="utf-8") == memory
    code, out, _ = run(capsys, "promote", "-w", ws, "--now", NOW, "--explain", ident)
    assert "promoted:  2026-03-04T23:00:00.000Z" in out


def test_budget_refusal_exits_3(recalled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (recalled / "MEMORY.md").write_text("# Memory\n\n" + "- an old fact\n" * 40, encoding="utf-8")
    code, out, err = run(capsys, "promote", "-w", str(recalled), "--now", NOW, "--apply", "--all-passing",
                         "-c", "dreaming.memoryMaxChars=600")
    assert code == 3
    assert "refused" in out and "dreaming.memoryMaxChars" in err


def test_bad_config_exits_2(recalled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "promote", "-w", str(recalled), "-c", "dreaming.minScore=3")
    assert code == 2 and "dreaming.minScore" in err
    code, _out, err = run(capsys, "dream", "-w", str(recalled), "-c", "dreaming.autoapply=true")
    assert code == 2 and "did you mean 'autoApply'" in err


def test_dream_dry_run_and_report(recalled: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    before = sorted((p, p.read_bytes()) for p in recalled.rglob("*") if p.is_file() and not p.name.endswith(".lock"))
    report = tmp_path / "dream.md"
    code, out, _ = run(capsys, "dream", "-w", str(recalled), "--now", NOW, "--dry-run", "--report", str(report))
    assert code == 0 and "dry run, nothing written" in out and "Staged 1 new candidate(s)" in out
    after = sorted((p, p.read_bytes()) for p in recalled.rglob("*") if p.is_file() and not p.name.endswith(".lock"))
    assert after == before
    assert report.read_text(encoding="utf-8") == out

    code, out, _ = run(capsys, "dream", "-w", str(recalled), "--now", NOW, "--json")
    data = json.loads(out)
    assert code == 0 and data["deep"]["passing"] == 1 and len(data["deep"]["stage"]["added"]) == 1
    assert queue_path(recalled).exists() and not (recalled / "MEMORY.md").exists()  # review mode: staged only
    code, out, _ = run(capsys, "dream", "-w", str(recalled), "--now", NOW, "-c", "dreaming.autoApply=true")
    assert code == 0 and "Promoted 1 into MEMORY.md (mode: passing)" in out
    assert PG in (recalled / "MEMORY.md").read_text(encoding="utf-8")


def test_commands_are_wired_into_the_mdrecall_entry_point(recalled: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-m", "mdrecall", "promote", "--workspace", str(recalled), "--now", NOW, "--stage", "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stage"]["added"][0]["text"] == f"Infra: {PG}"
