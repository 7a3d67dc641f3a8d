"""The recall store file: format, atomic replace, locking, concurrency, bounds, corruption."""

from __future__ import annotations

import json
import multiprocessing
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


def test_file_format_has_the_seed_fields(workspace: Path) -> None:
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12, 0.9)], at(), config={"timezone": "UTC"})
    path = workspace / "memory/.dreams/short-term-recall.json"
    raw = path.read_text(encoding="utf-8")
    assert raw.endswith("}\n") and raw.count("\n") == 3  # one entry per line, trailing newline
    data = json.loads(raw)
    assert data["version"] == 1 and data["updatedAt"] == "2026-03-02T09:00:00.000Z"
    (entry,) = data["entries"].values()
    assert SEED_FIELDS <= set(entry)
    assert "promotedAt" not in entry  # optional until promoted
    assert entry["snippet"] == "Postgres 16 runs on db-2, port 5433."
    assert (entry["startLine"], entry["endLine"]) == (6, 6)
    assert entry["recallDays"] == ["2026-03-02"] and len(entry["queryHashes"][0]) == 12
    # No temp or stray files besides the store and its lock.
    assert sorted(p.name for p in path.parent.iterdir()) == ["short-term-recall.json", "short-term-recall.json.lock"]


def test_nothing_is_written_when_nothing_changes(workspace: Path) -> None:
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(), config={"timezone": "UTC"})
    path = workspace / "memory/.dreams/short-term-recall.json"
    before = path.read_bytes(), path.stat().st_mtime_ns
    # Same query, same day: de-duplicated, so the store must not be rewritten (not even updatedAt).
    summary = record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(hours=2),
                             config={"timezone": "UTC"})
    assert summary.recorded == 0 and summary.skipped == {"same query today": 1}
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


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
    path = workspace / "memory/.dreams/short-term-recall.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json", encoding="utf-8")
    summary = record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(), config={"timezone": "UTC"})
    assert summary.recorded == 1
    assert json.loads(path.read_text())["entries"]
    assert [p.name for p in path.parent.glob("short-term-recall.json.corrupt-*")]


def test_malformed_entries_are_dropped_individually(workspace: Path) -> None:
    path = workspace / "memory/.dreams/short-term-recall.json"
    path.parent.mkdir(parents=True)
    good = RecallEntry(key="memory:memory/2026-03-02.md#abc", path="memory/2026-03-02.md", start_line=6,
                       end_line=6, snippet="Postgres 16 runs on db-2, port 5433.", recall_count=2).to_json()
    path.write_text(json.dumps({"version": 1, "entries": {"bad": {"path": 3}, good["key"]: good}}), encoding="utf-8")
    state = RecallStore(workspace).load()
    assert list(state.entries) == [good["key"]] and state.entries[good["key"]].recall_count == 2
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


def test_untouched_entries_are_written_back_verbatim_and_bad_lines_dropped_on_a_full_pass(workspace: Path) -> None:
    from mdrecall.dreaming import run_dream

    for query in ("postgres port", "kestrel cluster", "acme budget"):
        record_recalls(workspace, query, [hit("memory/2026-03-02.md", 1, 12)], at(), config={"timezone": "UTC"})
    path = workspace / "memory/.dreams/short-term-recall.json"
    lines = path.read_text(encoding="utf-8").split("\n")
    budget_line = next(i for i, l in enumerate(lines) if "Budget for Acme" in l)
    kestrel_line = next(l for l in lines if "kestrel" in l)
    lines[budget_line] = lines[budget_line].split(": ", 1)[0] + ': {"broken": true},'
    path.write_text("\n".join(lines), encoding="utf-8")
    # A search touching only the Postgres fact rewrites its line and leaves the others as they were.
    record_recalls(workspace, "postgres port", [hit("memory/2026-03-02.md", 1, 12)], at(days=1), config={"timezone": "UTC"})
    text = path.read_text(encoding="utf-8")
    assert kestrel_line in text.split("\n") and '{"broken": true}' in text
    # A full pass (ranking every entry) drops what cannot be read.
    run_dream(workspace, {"timezone": "UTC"}, at(days=1, hours=12))
    state = RecallStore(workspace).load()
    assert len(state.entries) == 2 and '"broken"' not in path.read_text(encoding="utf-8")
