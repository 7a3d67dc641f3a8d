"""The recall store (SQLite): format, locking, concurrency, bounds, corruption, the JSON import."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest
from dreamhelpers import at, hit, record_many

from mdrecall.dreaming import DreamingConfig, RecallStore, record_recalls
from mdrecall.dreaming.clock import to_iso
from mdrecall.dreaming.entry import RecallEntry
from mdrecall.dreaming.locking import FileLock
from mdrecall.errors import StoreError

SEED_FIELDS = {
    "key", "path", "startLine", "endLine", "snippet", "recallCount", "dailyCount", "groundedCount", "totalScore",
    "maxScore", "firstRecalledAt", "lastRecalledAt", "queryHashes", "recallDays", "conceptTags",
}


def _rows(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT key, entry FROM entries"))
    finally:
        conn.close()


def _meta(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT key, value FROM meta"))
    finally:
        conn.close()


def test_store_format_has_the_seed_fields(workspace: Path) -> None:
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(), config={"timezone": "UTC"})
    path = workspace / "memory/.dreams/short-term-recall.sqlite"
    # No temp or stray files besides the store and its lock (the WAL is folded in on close).
    assert sorted(p.name for p in path.parent.iterdir()) == ["short-term-recall.sqlite", "short-term-recall.sqlite.lock"]
    assert _meta(path) == {"version": "2", "updatedAt": "2026-03-02T09:00:00.000Z"}
    ((key, raw),) = _rows(path).items()
    entry = json.loads(raw)  # one row per entry, the entry as JSON
    assert entry["key"] == key and SEED_FIELDS <= set(entry)
    assert "promotedAt" not in entry  # optional until promoted
    assert entry["snippet"] == "Postgres 16 runs on db-2, port 5433."
    assert (entry["startLine"], entry["endLine"]) == (6, 6)
    assert entry["recallDays"] == ["2026-03-02"] and len(entry["queryHashes"][0]) == 12


def test_nothing_is_written_when_nothing_changes(workspace: Path) -> None:
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(), config={"timezone": "UTC"})
    path = workspace / "memory/.dreams/short-term-recall.sqlite"
    before = path.read_bytes(), path.stat().st_mtime_ns
    # Same query, same day: de-duplicated, so the store must not be written (not even updatedAt).
    summary = record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(hours=2),
                             config={"timezone": "UTC"})
    assert summary.recorded == 0 and summary.skipped == {"same query today": 1}
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_a_recording_rewrites_only_the_entries_it_touches(workspace: Path) -> None:
    for query in ("postgres port", "kestrel cluster", "acme budget"):
        record_recalls(workspace, query, [hit("memory/2026-03-02.md", 1, 12)], at(), config={"timezone": "UTC"})
    path = workspace / "memory/.dreams/short-term-recall.sqlite"
    before = _rows(path)
    assert len(before) == 3
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(days=1), config={"timezone": "UTC"})
    after = _rows(path)
    changed = {k for k in before if before[k] != after[k]}
    assert len(changed) == 1 and "Postgres" in after[changed.pop()]


def test_concurrent_processes_lose_no_counts(workspace: Path) -> None:
    workers, each = 4, 12
    ctx = multiprocessing.get_context("spawn")  # real separate interpreters
    with ctx.Pool(workers) as pool:
        results = pool.starmap(record_many, [(str(workspace), w, each) for w in range(workers)])
    assert sum(results) == workers * each
    state = RecallStore(workspace).load()
    (entry,) = state.entries.values()
    assert entry.recall_count == workers * each
    assert len(entry.query_hashes) == 32  # capped, keeping the latest


def test_concurrent_threads_lose_no_counts(workspace: Path) -> None:
    def run(worker: int) -> None:
        for i in range(10):
            record_recalls(workspace, f"kestrel cluster name {worker}-{i}", [hit("memory/2026-03-02.md", 1, 12)],
                           at(), config={"timezone": "UTC"})

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (entry,) = RecallStore(workspace).load().entries.values()
    assert entry.snippet == "The staging cluster is called kestrel." and entry.recall_count == 40


def test_lock_times_out_with_a_clear_error(workspace: Path) -> None:
    store = RecallStore(workspace, lock_timeout=0.2)
    with FileLock(store.lock_path):
        with pytest.raises(StoreError, match="locked by another mdrecall process"):
            with store.update(at()):
                pass


def test_corrupt_store_is_moved_aside_not_fatal(workspace: Path) -> None:
    path = workspace / "memory/.dreams/short-term-recall.sqlite"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 300)
    summary = record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(), config={"timezone": "UTC"})
    assert summary.recorded == 1
    assert _rows(path)
    assert [p.name for p in path.parent.glob("short-term-recall.sqlite.corrupt-*")]


def test_a_json_store_is_imported_once_and_kept(workspace: Path) -> None:
    """Stores written by earlier versions (one JSON file) move into the SQLite store on first use;
    counts go on from there and promotion reads them."""
    from mdrecall.dreaming import list_candidates

    legacy = workspace / "memory/.dreams/short-term-recall.json"
    legacy.parent.mkdir(parents=True)
    fact = "Postgres 16 runs on db-2, port 5433."
    old = RecallEntry(key="memory:memory/2026-03-02.md#5f0b3c2a9d1e", path="memory/2026-03-02.md", start_line=6,
                      end_line=6, snippet=fact, recall_count=4, total_relevance=4.0, claim_hash="5f0b3c2a9d1e",
                      query_hashes=["a1", "a2", "a3", "a4"], recall_days=["2026-02-20", "2026-02-24"],
                      last_recalled_at="2026-02-24T09:00:00.000Z").to_json()
    # The layout the JSON store had: one entry per line.
    legacy.write_text(
        '{"version": 1, "updatedAt": "2026-02-24T09:00:00.000Z", "entries": {\n'
        f'  {json.dumps(old["key"])}: {json.dumps(old)}\n'
        '}, "promotedHashes": ["0123456789ab"]}\n',
        encoding="utf-8",
    )
    assert RecallStore(workspace).exists()
    state = RecallStore(workspace).load()
    assert state.entries[old["key"]].recall_count == 4 and "0123456789ab" in state.promoted_hashes
    assert not legacy.exists() and legacy.with_name("short-term-recall.json.migrated").exists()
    record_recalls(workspace, "which port does postgres use", [hit("memory/2026-03-02.md", 1, 12)], at(),
                   config={"timezone": "UTC"})
    entries = list(RecallStore(workspace).load().entries.values())
    assert [e.snippet for e in entries].count(fact) >= 1
    assert list_candidates(workspace, {"timezone": "UTC"}, at(), include_failing=True)


def test_malformed_entries_are_dropped_individually(workspace: Path) -> None:
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(), config={"timezone": "UTC"})
    path = workspace / "memory/.dreams/short-term-recall.sqlite"
    (good,) = _rows(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO entries(key, entry) VALUES('bad', '{\"path\": 3}')")
    conn.close()
    state = RecallStore(workspace).load()
    assert list(state.entries) == [good] and state.entries[good].recall_count == 1
    assert state.warnings


def _entry(key: str, recalls: int, days: list[str], last: str, queries: int | None = None) -> RecallEntry:
    return RecallEntry(key=key, path="memory/2026-03-02.md", start_line=1, end_line=1, snippet=key,
                       recall_count=recalls, total_relevance=float(recalls), claim_hash=key,
                       query_hashes=[f"q{i}" for i in range(queries or recalls)], recall_days=days,
                       last_recalled_at=last)


def test_bound_evicts_one_offs_before_entries_that_matter(workspace: Path) -> None:
    cfg = DreamingConfig(maxEntries=50, timezone="UTC")
    store = RecallStore(workspace, cfg)
    now = at(days=10)
    with store.update(now) as state:
        for i in range(5):  # recurring, must survive
            e = _entry(f"recurring{i}", 4, ["2026-03-05", "2026-03-07", "2026-03-11"], to_iso(at(days=1)))
            state.entries[e.key] = e
        for i in range(3):  # already promoted: first to go
            e = _entry(f"promoted{i}", 5, ["2026-03-05"], to_iso(at(days=9)))
            e.promoted_at = to_iso(at(days=9))
            state.entries[e.key] = e
        for i in range(60):  # one-offs, recent ones newer than the recurring ones
            e = _entry(f"once{i:02d}", 1, ["2026-03-11"], to_iso(at(days=2 + i / 10)))
            state.entries[e.key] = e
    state = store.load()
    # Down to the bound, plus up to a tenth of slack taken from expendable entries only.
    assert 45 <= len(state.entries) <= 50
    assert all(f"recurring{i}" in state.entries for i in range(5))
    assert not any(k.startswith("promoted") for k in state.entries)
    # the least recently recalled one-offs went first
    assert "once00" not in state.entries and "once59" in state.entries
    survivors = sorted(k for k in state.entries if k.startswith("once"))
    assert survivors == [f"once{i:02d}" for i in range(60 - len(survivors), 60)]


def test_bound_keeps_entries_that_matter_over_the_slack(workspace: Path) -> None:
    cfg = DreamingConfig(maxEntries=50, timezone="UTC")
    store = RecallStore(workspace, cfg)
    now = at(days=10)
    with store.update(now) as state:
        for i in range(52):
            e = _entry(f"recurring{i:02d}", 4, ["2026-03-05", "2026-03-07", "2026-03-11"], to_iso(at(days=1 + i / 100)))
            state.entries[e.key] = e
    state = store.load()
    assert len(state.entries) == 50  # only the excess, never slack, from entries that matter


def test_untouched_entries_stay_as_they_are_and_bad_ones_go_on_a_full_pass(workspace: Path) -> None:
    from mdrecall.dreaming import run_dream

    for query in ("postgres port", "kestrel cluster", "acme budget"):
        record_recalls(workspace, query, [hit("memory/2026-03-02.md", 1, 12)], at(), config={"timezone": "UTC"})
    path = workspace / "memory/.dreams/short-term-recall.sqlite"
    rows = _rows(path)
    budget_key = next(k for k, v in rows.items() if "Budget for Acme" in v)
    kestrel_key = next(k for k, v in rows.items() if "kestrel" in v)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE entries SET entry = '{\"broken\": true}' WHERE key = ?", (budget_key,))
    conn.close()
    # A search touching only the Postgres fact leaves the other entries as they were, broken included.
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(days=1), config={"timezone": "UTC"})
    after = _rows(path)
    assert after[kestrel_key] == rows[kestrel_key] and after[budget_key] == '{"broken": true}'
    # A full pass (ranking every entry) drops what cannot be read.
    run_dream(workspace, {"timezone": "UTC"}, at(days=1, hours=12))
    state = RecallStore(workspace).load()
    assert len(state.entries) == 2 and budget_key not in _rows(path)
