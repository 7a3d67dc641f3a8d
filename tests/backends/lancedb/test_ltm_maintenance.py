"""Bounded storage: maintenance compacts, refreshes the full-text index and removes old versions."""

from __future__ import annotations

from typing import Any


def _store(m: Any, n: int) -> None:
    for i in range(n):
        m.store_memory(f"Fact {i}: server rack-{i} sits in room {i % 7} of building {chr(65 + i % 5)}, row {i}.")


def test_storage_stays_bounded(open_ltm: Any, target: Any, ltm_ws: Any, tmp_path: Any) -> None:
    writes = 12
    off = open_ltm(ltm_ws, maintenance={"enabled": False}, dbPath=target.db_path + "-off", duplicateThreshold=1.0)
    _store(off, writes)
    versions_off = off.store.version_count()
    on = open_ltm(ltm_ws, maintenance={"everyWrites": 4, "afterSeconds": 3600, "keepVersionsMinutes": 0},
                  duplicateThreshold=1.0)
    _store(on, writes)
    on.maintainer.close()  # wait for the background run(s) and run what is pending
    stats = on.store.stats()
    assert versions_off > writes  # every write is a version without maintenance
    # One run leaves at most two fragments (the compacted one and the last appends merged) and the
    # version its index refresh committed after the cleanup.
    assert stats["versions"] <= 3 and stats["fragments"] <= 2
    assert stats["rows"] == writes and on.maintainer.runs >= 3 and on.maintainer.last_error is None
    assert all(i["unindexedRows"] == 0 for i in stats["indices"] if i["type"] == "FTS")
    on_files = [p for p in target.files() if not p.startswith(target.db_path.rsplit("/", 1)[-1] + "-off")]
    assert on.count() == writes
    # what a later search needs is all there
    assert "rack-5" in on.search("Where is server rack-5?").results[0].snippet
    assert len(on_files) < 40, on_files
