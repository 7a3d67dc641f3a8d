"""Recall tracking (dreaming) sees QMD's answers, and the builtin's when it answers in QMD's place,
each search recorded once; reads through QMD record grounding."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path

from qmdhelpers import PLANTED_PATH, PLANTED_QUESTION, make_workspace, open_qmd, wait_for

from mdrecall.dreaming import RecallStore


def test_qmd_and_fallback_answers_are_recorded_once(tmp_path: Path, qmd_binary: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    # Without the per-day dedupe a search recorded twice (by QMD's listeners and the builtin's) would show.
    m = open_qmd(ws, tmp_path / "state", dreaming={"dedupeByQueryPerDay": False, "timezone": "UTC"})
    try:
        assert m.wait_warm(60)
        first = m.search(PLANTED_QUESTION, now=datetime(2026, 11, 21, 9, tzinfo=UTC))
        assert first.provider == "qmd" and first.results[0].path == PLANTED_PATH
        os.kill(m.process.pid, signal.SIGKILL)  # our own child, by its id
        wait_for(lambda: not m.process.alive, 5, "QMD to die")
        second = m.search("when is the disaster recovery drill?", now=datetime(2026, 11, 22, 9, tzinfo=UTC))
        assert second.provider != "qmd" and second.degraded and second.results[0].path == PLANTED_PATH
        read = m.read_file(PLANTED_PATH)
        m.flush()
        tracking = m.status().details["recallTracking"]
        assert tracking["lastError"] is None and tracking["queued"] == 0
    finally:
        m.close()
    drill = [e for e in RecallStore(ws).load().entries.values() if e.path == PLANTED_PATH and "Priya" in e.snippet]
    assert len(drill) == 1, [e.snippet for e in drill]
    entry = drill[0]
    assert entry.recall_count == 2 and entry.unique_queries == 2
    assert entry.recall_days == ["2026-11-21", "2026-11-22"]
    assert "Priya" in read.text and entry.grounded_count == 1
