"""Freshness that does not trust events: reconciliation, honest status, stale answers, sync triggers.

Real files, real SQLite, provider "none" (vectors are not the point here). No test sleeps to let a
clock tick: every check below must hold immediately after the write.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from indexcheck import counting_walks, wait_for
from mdrecall import open_manager
from mdrecall.freshness.snapshot import DIRS_KEY
from unprivileged import run_where_permissions_apply

NOTES = {
    "MEMORY.md": "# Memory\n- The staging database is called amber.\n",
    "memory/2026-11-01.md": "# 2026-11-01\n- Met Dana about the quarterly roadmap.\n",
    "memory/projects/atlas.md": "# Atlas\n- Atlas ships in March.\n",
}


def _paths(resp: Any) -> list[str]:
    return [r.path for r in resp.results]


def _indexed_paths(resp: Any) -> list[str] | None:
    """The hits' paths when the index itself answered (None for a stale answer, whose hits of files
    not indexed yet were read directly): what a test of the watcher or of interval syncs waits for."""
    return None if resp.stale else _paths(resp)


def _msg(role: str, text: str) -> str:
    return json.dumps({"role": role, "content": text}) + "\n"


# --- reconciliation: the next search sees every change, no watcher ---------------------------------


def test_next_search_sees_creates_edits_and_deletes_without_a_watcher(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        assert _paths(m.search("amber", min_score=0)) == ["MEMORY.md"]

        # A new file in brand-new nested directories (whose parent holds no Markdown at all).
        deep = ws / "memory" / "archive" / "2025" / "q4"
        deep.mkdir(parents=True)
        (deep / "heliotrope.md").write_text("# Queue\n- The queue is called heliotrope.\n")
        resp = m.search("heliotrope", min_score=0)
        assert _paths(resp) == ["memory/archive/2025/q4/heliotrope.md"] and not resp.stale

        # An in-place edit that keeps the size, right after the index read the file.
        (ws / "MEMORY.md").write_text(NOTES["MEMORY.md"].replace("amber", "cobra"))
        assert _paths(m.search("cobra", min_score=0)) == ["MEMORY.md"]
        assert _paths(m.search("amber", min_score=0)) == []

        # Rename, then delete.
        (deep / "heliotrope.md").rename(deep / "renamed.md")
        assert _paths(m.search("heliotrope", min_score=0)) == ["memory/archive/2025/q4/renamed.md"]
        (deep / "renamed.md").unlink()
        assert _paths(m.search("heliotrope", min_score=0)) == []

        status = m.status()
        assert status.clean is True and status.files == len(NOTES)


def test_every_response_reports_freshness(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as m:
        resp = m.search("amber", min_score=0)
        fresh = resp.freshness
        assert fresh.stale is False and resp.stale is False
        assert fresh.files_on_disk == len(NOTES) and fresh.files_indexed == len(NOTES)
        assert fresh.pending_changes == 0 and fresh.last_sync_at and fresh.checked_at
        assert fresh.watcher == "off"
        assert resp.to_dict()["freshness"] == fresh.to_dict()
        status = m.status()
        assert status.freshness.files_on_disk == len(NOTES) and status.last_sync_at


# --- status never says clean while the files differ -------------------------------------------------


def test_status_is_never_clean_while_files_differ(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({**NOTES, "memory/blob.md": b"binary\x00data\n"})
    transcript = ws / ".openclaw/sessions/main/transcripts/s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text(_msg("user", "We picked the cedar theme."))
    config = cfg(sources=["memory", "sessions"], sync={"onSearch": False, "onSessionStart": False})
    with open_manager(ws, config) as m:
        assert m.status().clean is False  # never indexed
        m.sync()
        assert m.status().clean is True

        def pending_after(change: Callable[[], None]) -> dict[str, Any]:
            change()
            status = m.status()
            assert status.clean is False and status.details["dirty"] is True
            pending = status.details["pendingChanges"]
            m.sync()
            assert m.status().clean is True
            return pending

        assert pending_after(lambda: (ws / "memory/new.md").write_text("# New\n"))["new"] == ["memory/new.md"]
        assert pending_after(lambda: (ws / "memory/new.md").write_text("# Neu\n"))["changed"] == ["memory/new.md"]
        assert pending_after(lambda: (ws / "memory/new.md").unlink())["deleted"] == ["memory/new.md"]
        # A skipped (binary) file that is fixed, then deleted.
        assert pending_after(lambda: (ws / "memory/blob.md").write_text("# Blob\n"))["changed"] == ["memory/blob.md"]
        (ws / "memory/blob.md").write_bytes(b"\x00")
        m.sync()
        assert pending_after(lambda: (ws / "memory/blob.md").unlink())["deleted"] == ["memory/blob.md"]
        # Transcripts: a new one, an append (deferred by automatic syncs, still pending), a deletion.
        other = ws / ".openclaw/sessions/ops/transcripts/s2.jsonl"
        other.parent.mkdir(parents=True)
        rel_other = ".openclaw/sessions/ops/transcripts/s2.jsonl"
        assert pending_after(lambda: other.write_text(_msg("user", "hello")))["new"] == [rel_other]
        with transcript.open("a") as fh:
            fh.write(_msg("assistant", "Cedar it is."))
        pending = m.status().details["pendingChanges"]
        assert pending["changed"] == [".openclaw/sessions/main/transcripts/s1.jsonl"]
        assert pending["deferred"] == [".openclaw/sessions/main/transcripts/s1.jsonl"]
        m.sync()
        assert pending_after(lambda: other.unlink())["deleted"] == [rel_other]


def unreadable_then_readable(ws: str, db: str, watch: bool) -> None:
    """A note is unreadable (mode 000) at the first sync, then readable again (chmod 644: only its
    ctime moves). Run where permissions apply (see tests/unprivileged.py)."""
    import os

    from indexcheck import index_content

    note = Path(ws) / "memory/locked.md"
    sync = {"watch": watch, "onSearch": not watch, "onSessionStart": False, "watchDebounceMs": 50,
            "reconcileIntervalMs": 3_600_000}  # only the quick check (or the watcher) may notice
    config = {"provider": "none", "store": {"path": db}, "sync": sync}
    os.chmod(note, 0o000)
    try:
        open(note).close()
        raise AssertionError("mode 000 did not make the note unreadable here")
    except PermissionError:
        pass
    with open_manager(ws, config) as m:
        m.sync()
        status = m.status()
        assert status.clean is True  # unreadable: skipped, nothing pending
        assert [(s.path, s.reason) for s in status.skipped] == [("memory/locked.md", "cannot read: Permission denied")]
        assert _paths(m.search("amber", min_score=0)) == ["MEMORY.md"]
        os.chmod(note, 0o644)
        status = m.status()
        assert status.clean is False and status.details["pendingChanges"]["changed"] == ["memory/locked.md"]
        if watch:
            def from_the_index() -> bool:  # not read directly as a file not indexed yet: the watcher synced it
                found = m.search("ocelot", min_score=0)
                return not found.stale and _paths(found) == ["memory/locked.md"]

            assert wait_for(from_the_index)
        else:
            assert _paths(m.search("ocelot", min_score=0)) == ["memory/locked.md"]
        assert m.status().clean is True
    fresh = db + ".fresh"
    with open_manager(ws, {**config, "store": {"path": fresh}, "sync": {"watch": False}}) as m:
        m.sync()
    assert index_content(Path(db)) == index_content(Path(fresh))
    print("ok")


@pytest.mark.parametrize("watch", [False, True], ids=["quick-check", "watcher"])
def test_a_file_that_becomes_readable_is_indexed(make_ws: Callable[..., Path], tmp_path: Path, watch: bool) -> None:
    if watch:
        pytest.importorskip("watchfiles")
    ws = make_ws({**NOTES, "memory/locked.md": "# Locked\n- The ocelot key rotation runs on Fridays.\n"})
    code = f"from test_freshness import unreadable_then_readable\nunreadable_then_readable({str(ws)!r}, {str(tmp_path / 'index.sqlite')!r}, {watch})"
    assert run_where_permissions_apply(code).strip().endswith("ok")


def test_a_search_that_may_not_sync_says_it_is_stale(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"onSearch": False, "onSessionStart": False})) as m:
        first = m.search("amber", min_score=0)
        # Nothing indexed: the files not indexed are read directly, and the answer says so.
        assert first.stale and "no index yet" in " ".join(first.warnings) and first.mode == "file-scan"
        assert _paths(first) == ["MEMORY.md"]
        assert "3 memory file(s) not indexed yet were read directly (keyword match only)" in first.warnings
        m.sync()
        assert not m.search("amber", min_score=0).stale
        (ws / "memory/late.md").write_text("# Late\n- The fjord project starts Monday.\n")
        resp = m.search("fjord", min_score=0)
        assert resp.stale and resp.freshness.stale and resp.freshness.pending_changes == 1
        assert any("1 file(s) changed since the last sync, read directly instead" in w for w in resp.warnings)
        assert _paths(resp) == ["memory/late.md"] and resp.mode == "keyword-only"
        m.sync()
        resp = m.search("fjord", min_score=0)
        assert not resp.stale and _paths(resp) == ["memory/late.md"]


# --- in-process: a search never queues behind another thread's long sync -----------------------------


def test_search_does_not_wait_for_a_long_sync_in_another_thread(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"searchWaitMs": 200})) as m:
        m.sync()
        inside, release = threading.Event(), threading.Event()

        def slow_progress(_progress: Any) -> None:
            inside.set()
            release.wait(60)  # a watcher or interval sync stuck on a slow disk or a slow provider

        syncer = threading.Thread(target=lambda: m.sync(progress=slow_progress), daemon=True)
        syncer.start()
        assert inside.wait(30)
        (ws / "memory/late.md").write_text("# Late\n- The fjord project starts Monday.\n")
        answers: list[Any] = []
        searcher = threading.Thread(target=lambda: answers.append(m.search("amber fjord", min_score=0)), daemon=True)
        searcher.start()
        searcher.join(30)
        try:
            assert not searcher.is_alive(), "search waited for the other thread's sync"
            resp = answers[0]
            # The index answers for amber; the note it does not hold yet is read directly.
            assert resp.stale and sorted(_paths(resp)) == ["MEMORY.md", "memory/late.md"]
            assert any("another sync in this process is running" in w for w in resp.warnings)
        finally:
            release.set()
            syncer.join(30)
        resp = m.search("fjord", min_score=0)
        assert not resp.stale and _paths(resp) == ["memory/late.md"]


# --- sync triggers: session start, watcher, interval ------------------------------------------------


def test_session_start_syncs_once_per_session_key(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    with open_manager(ws, cfg(sync={"onSearch": False, "onSessionStart": True})) as m:
        resp = m.search("amber", min_score=0, session_key="alpha")
        assert _paths(resp) == ["MEMORY.md"] and not resp.stale
        (ws / "memory/late.md").write_text("# Late\n- The fjord project starts Monday.\n")
        again = m.search("fjord", min_score=0, session_key="alpha")  # same session: no second sync
        assert again.stale and _paths(again) == ["memory/late.md"]  # read directly: not indexed yet
        other = m.search("fjord", min_score=0, session_key="beta")  # a new session: one sync
        assert not other.stale and _paths(other) == ["memory/late.md"]


def test_sync_watch_config_runs_a_watcher_until_close(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    pytest.importorskip("watchfiles")
    ws = make_ws(NOTES)
    config = cfg(sync={"watch": True, "watchDebounceMs": 100, "onSearch": False, "onSessionStart": False})
    m = open_manager(ws, config)
    try:
        watcher = m.watcher  # type: ignore[attr-defined]
        assert watcher is not None and watcher.running
        status = m.status()
        assert status.details["watcher"]["running"] is True and status.freshness.watcher == "running"
        m.sync()
        (ws / "memory" / "new-dir").mkdir()
        (ws / "memory" / "new-dir" / "note.md").write_text("# Note\n- The quokka migration is done.\n")
        # Only the watcher can sync here (onSearch is off); the search itself just reports freshness.
        assert wait_for(lambda: _indexed_paths(m.search("quokka", min_score=0)) == ["memory/new-dir/note.md"])
        assert m.status().clean is True
    finally:
        m.close()
    assert not watcher.running


def test_interval_sync_runs_in_the_background(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    config = cfg(sync={"intervalMinutes": 0.002, "onSearch": False, "onSessionStart": False})  # every 0.12 s
    m = open_manager(ws, config)
    try:
        assert m.status().details["intervalSync"]["running"] is True
        assert wait_for(lambda: m.status().files == len(NOTES))
        (ws / "memory/late.md").write_text("# Late\n- The fjord project starts Monday.\n")
        assert wait_for(lambda: m.status().files == len(NOTES) + 1)
        assert m.status().clean is True
    finally:
        m.close()
    assert not m.monitor.status()["intervalSync"]["running"]  # type: ignore[attr-defined]


# --- growing transcripts: delta thresholds ------------------------------------------------------------


def test_growing_transcript_is_reindexed_by_delta_thresholds(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    transcript = ws / ".openclaw/sessions/main/transcripts/s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text(_msg("user", "Let us call the release pelican."))
    rel = ".openclaw/sessions/main/transcripts/s1.jsonl"
    config = cfg(sources=["memory", "sessions"], sync={"sessions": {"deltaMessages": 3, "deltaBytes": 100_000}})
    with open_manager(ws, config) as m:
        assert _paths(m.search("pelican", min_score=0, session_key="main")) == [rel]

        with transcript.open("a") as fh:
            fh.write(_msg("assistant", "Pelican noted, and the mascot is a walrus."))
        (ws / "memory/late.md").write_text("# Late\n- The walrus costume is in storage.\n")
        resp = m.search("walrus", min_score=0, session_key="main")
        # The memory file is indexed at once; the one-line append waits for the threshold.
        assert _paths(resp) == ["memory/late.md"] and not resp.stale
        assert resp.freshness.deferred_sessions == 1 and resp.freshness.pending_changes == 1
        assert m.status().details["pendingChanges"]["deferred"] == [rel] and m.status().clean is False

        with transcript.open("a") as fh:
            fh.write(_msg("user", "And the venue?") + _msg("assistant", "The venue is the old walrus boathouse."))
        resp = m.search("walrus", min_score=0, session_key="main")  # 3 appended messages: re-indexed
        assert set(_paths(resp)) == {"memory/late.md", rel} and resp.freshness.deferred_sessions == 0

        # A rewrite that grows the file is not an append: never deferred.
        transcript.write_text(_msg("user", "Everything before is void; the codename is osprey.") + _msg("user", "ok"))
        assert _paths(m.search("osprey", min_score=0, session_key="main")) == [rel]

        # An explicit sync indexes appends below the thresholds.
        with transcript.open("a") as fh:
            fh.write(_msg("assistant", "Osprey confirmed, budget is tangerine."))
        assert m.search("tangerine", min_score=0, session_key="main").results == []
        assert m.sync().files_indexed == 1
        assert _paths(m.search("tangerine", min_score=0, session_key="main")) == [rel]
        assert m.status().clean is True


def test_new_session_indexes_its_transcript_in_full(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    transcript = ws / ".openclaw/sessions/ops/transcripts/s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text(_msg("user", "The pager rotation starts Monday."))
    rel = ".openclaw/sessions/ops/transcripts/s1.jsonl"
    config = cfg(sources=["memory", "sessions"], sync={"sessions": {"deltaMessages": 50}})
    with open_manager(ws, config) as m:
        m.search("pager", min_score=0, session_key="main")  # session "main" starts
        with transcript.open("a") as fh:
            fh.write(_msg("assistant", "Rotation owner is Priya."))
        assert m.search("Priya", min_score=0, session_key="main").results == []  # deferred append
        # The first search of session "ops" syncs without deferring.
        assert _paths(m.search("Priya", min_score=0, session_key="ops")) == [rel]


# --- the default: a watcher, and searches that do not touch the files ---------------------------------


def test_default_config_watches_and_searches_skip_the_file_check(make_ws: Callable[..., Path], tmp_path: Path) -> None:
    """``sync.watch`` is on by default: once synced, searches neither sync nor stat the files; a
    change reaches the index through the watcher's event."""
    ws = make_ws(NOTES)
    # Only the reconcile interval is shortened (to show it no longer applies with a watcher).
    config = {"provider": "none", "store": {"path": str(tmp_path / "default.sqlite")}, "sync": {"reconcileIntervalMs": 50}}
    m = open_manager(ws, config)
    try:
        assert m.status().details["watcher"]["running"] is True
        assert m.search("amber").results  # the first search syncs
        # Trusted once a check after the watcher attached found the files as synced (the notes were
        # written just now: on a loaded machine the attach can come after that first sync).
        assert wait_for(lambda: bool(m.search("amber").results) and m.monitor._watcher_trusted())
        syncs = _counting_syncs(m)
        for _ in range(30):
            assert not m.search("quarterly roadmap").stale
            time.sleep(0.02)  # 0.6 s in all: twelve reconcile intervals
        assert syncs == []
        (ws / "memory/2026-11-02.md").write_text("# 2026-11-02\n- The walrus audit is booked.\n", encoding="utf-8")
        assert wait_for(lambda: _indexed_paths(m.search("walrus audit")) == ["memory/2026-11-02.md"])
        assert syncs  # the watcher's event (pending, or its own debounced sync) brought it in
    finally:
        m.close()


def test_a_search_that_synced_the_pending_events_spares_the_watcher_its_own_sync(
    make_ws: Callable[..., Path], cfg: Callable[..., dict]
) -> None:
    """A search that finds events pending syncs first; those events are then covered, and the
    watcher does not sync them again once its debounce ends (a second walk of the files per edit)."""
    ws = make_ws(NOTES)
    m = open_manager(ws, cfg(sync={"watch": True, "watchDebounceMs": 1000}))
    try:
        watcher = m.watcher
        assert watcher is not None and watcher.wait_ready(30)
        assert wait_for(lambda: bool(m.search("amber").results) and m.monitor._watcher_trusted())
        assert wait_for(lambda: not watcher.has_pending())
        before = watcher.stats.callbacks
        watcher.notify([ws / "memory/projects/atlas.md"])
        assert watcher.has_pending()
        assert _paths(m.search("Atlas ships", min_score=0)) == ["memory/projects/atlas.md"]
        assert not watcher.has_pending()
        time.sleep(1.5)
        assert watcher.stats.callbacks == before
        watcher.notify([ws / "memory/projects/atlas.md"])
        watcher.covered(time.monotonic() - 60)  # a sync that began before this event: it stays
        assert watcher.has_pending()
    finally:
        m.close()


def test_a_sync_from_an_earlier_look_leaves_later_events_pending(
    make_ws: Callable[..., Path], cfg: Callable[..., dict]
) -> None:
    """A sync that starts from what a check saw earlier saw the files as of that check: an edit made
    after it keeps its watcher event (the watcher syncs it), and the next check finds it moved."""
    ws = make_ws(NOTES)
    _settle(ws)  # written just now: the first sync's snapshot would be racy, and no look starts from it
    m = open_manager(ws, cfg(sync={"watch": True, "watchDebounceMs": 5000}))
    try:
        watcher = m.watcher
        assert watcher is not None and watcher.wait_ready(30)
        m.sync()
        time.sleep(0.1)
        (ws / "memory/2026-11-06.md").write_text("# 2026-11-06\n- The ibis survey started.\n")
        time.sleep(0.1)
        snapshot = m.monitor._snapshot
        assert snapshot is not None
        delta = snapshot.delta()
        assert delta is not None and delta.moved
        later = ws / "memory/projects/atlas.md"
        with later.open("a") as fh:
            fh.write("- The kestrel review moved to May.\n")
        watcher.notify([later])
        m.sync_since(snapshot, delta, lock_timeout=None, defer_sessions=True)
        assert watcher.has_pending()  # the edit after the look: still the watcher's to sync
        fresh = m.monitor._snapshot
        assert fresh is not None and fresh.delta() is not None and fresh.delta().changed == [str(later)]  # type: ignore[union-attr]
    finally:
        m.close()


def test_a_watcher_sync_takes_its_own_look(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """The watcher hands over events it will not report again: its sync looks at the files itself,
    never reusing what an earlier check saw (an edit between that check and the events is in them)."""
    ws = make_ws(NOTES)
    _settle(ws)
    m = open_manager(ws, cfg(sync={"watch": True, "watchDebounceMs": 5000}))
    try:
        assert m.watcher is not None and m.watcher.wait_ready(30)
        m.sync()
        time.sleep(0.1)
        (ws / "memory/2026-11-06.md").write_text("# 2026-11-06\n- The ibis survey started.\n")
        time.sleep(0.1)
        snapshot = m.monitor._snapshot
        assert snapshot is not None and not m.monitor._verify(snapshot)  # a check saw the new note
        assert m.monitor._moved is not None and m.monitor._moved[0] is snapshot
        later = ws / "memory/projects/atlas.md"
        with later.open("a") as fh:
            fh.write("- The kestrel review moved to May.\n")
        time.sleep(0.1)
        m.monitor._on_change([later])
        with m.index.reading() as db:
            assert db.files()["memory/projects/atlas.md"].size == later.stat().st_size
    finally:
        m.close()


def test_background_recheck_catches_what_the_watcher_missed(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """Events can be lost (an overflowed queue, network filesystems): the background re-check
    (``sync.watchReconcileIntervalMs``) still brings the change in, without any search asking."""
    ws = make_ws(NOTES)
    m = open_manager(ws, cfg(sync={"watch": True, "watchReconcileIntervalMs": 300, "onSearch": False, "onSessionStart": False}))
    try:
        watcher = m.watcher  # type: ignore[attr-defined]
        assert watcher is not None and watcher.running
        assert m.status().details["intervalSync"]["periodSeconds"] == pytest.approx(0.3)
        m.sync()
        watcher.notify = lambda paths: None  # every event from now on is lost
        (ws / "memory/2026-11-03.md").write_text("# 2026-11-03\n- The narwhal review moved.\n", encoding="utf-8")
        assert wait_for(lambda: m.status().files == len(NOTES) + 1, timeout=10)
        assert _paths(m.search("narwhal review")) == ["memory/2026-11-03.md"]
    finally:
        m.close()


# --- a new process: the snapshot the last sync stored in the index, no full walk ------------------------


def _settle(root: Path) -> None:
    """Date every file and directory a minute back, as if written long before the sync (no racy
    entries: the sync then stores its directory record)."""
    past = time.time() - 60
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past))


def _counting_syncs(m: Any) -> list[str]:
    """The thread of every sync ``m`` runs from now on: full, or from a snapshot (``sync_since``)."""
    syncs: list[str] = []
    for name in ("sync", "sync_since"):
        real = getattr(m, name)

        def counting(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            syncs.append(threading.current_thread().name)
            return _real(*args, **kwargs)

        setattr(m, name, counting)
    return syncs


def _index_rows(m: Any) -> tuple[Any, ...]:
    """What the index holds of the files: their rows, their chunks, the directories its record names."""
    with m.index.reading() as db:
        files = sorted((r.path, r.source, r.hash, r.mtime, r.size) for r in db.files().values())
        chunks = db.conn.execute("SELECT path, start_line, end_line, hash, text FROM chunks ORDER BY path, start_line").fetchall()
        skipped = sorted(db.skipped().items())
        record = json.loads(db.get_kv(DIRS_KEY) or "{}")
    return files, chunks, skipped, record


def test_a_new_process_trusts_its_index_when_nothing_moved(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    _settle(ws)
    with open_manager(ws, cfg()) as first:
        first.sync()
    with open_manager(ws, cfg()) as second:  # a new manager: no snapshot of its own, as in a new process
        syncs = _counting_syncs(second)
        resp = second.search("amber", min_score=0)
        assert _paths(resp) == ["MEMORY.md"] and not resp.stale
        assert syncs == []  # the stored snapshot held: no walk, no sync
        assert resp.freshness.files_indexed == len(NOTES) and resp.freshness.checked_at


@pytest.mark.parametrize("change", ["append", "same-size edit", "new file", "new directory", "delete", "rename"])
def test_a_new_process_still_catches_every_change(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored snapshot says what moved, and the first sync looks at that alone (index/scope.py):
    no listing of every file, the same index as a full sync's."""
    ws = make_ws(NOTES)
    _settle(ws)
    with open_manager(ws, cfg()) as first:
        first.sync()
    target = ws / "memory/projects/atlas.md"
    expect: tuple[str, list[str]]
    if change == "append":
        with target.open("a", encoding="utf-8") as fh:
            fh.write("- The launch review is on Tuesday.\n")
        expect = ("launch review Tuesday", ["memory/projects/atlas.md"])
    elif change == "same-size edit":
        target.write_text(NOTES["memory/projects/atlas.md"].replace("March", "Mayor"), encoding="utf-8")
        expect = ("Mayor", ["memory/projects/atlas.md"])
    elif change == "new file":
        (ws / "memory/2026-11-03.md").write_text("# 2026-11-03\n- The walrus audit is booked.\n", encoding="utf-8")
        expect = ("walrus audit", ["memory/2026-11-03.md"])
    elif change == "new directory":
        (ws / "memory/archive/deep").mkdir(parents=True)
        (ws / "memory/archive/deep/old.md").write_text("# Old\n- The heliotrope queue was retired.\n", encoding="utf-8")
        expect = ("heliotrope", ["memory/archive/deep/old.md"])
    elif change == "delete":
        target.unlink()
        expect = ("Atlas ships", [])
    else:
        target.rename(ws / "memory/projects/atlas-v2.md")
        expect = ("Atlas ships", ["memory/projects/atlas-v2.md"])
    time.sleep(0.1)  # past the racy window: both syncs below store their record of the directories
    walks = counting_walks(monkeypatch)
    with open_manager(ws, cfg()) as second:
        syncs = _counting_syncs(second)
        resp = second.search(expect[0], min_score=0)
        assert _paths(resp) == expect[1] and not resp.stale
        assert syncs == ["MainThread"]  # the stored snapshot did not hold: one sync
        assert walks == []  # of what moved only
        scoped = _index_rows(second)
        second.sync()  # a full one: nothing left to do, the same rows
        assert walks and _index_rows(second) == scoped and second.last_report.files_indexed == 0


def readable_again_in_a_new_process(ws: str, db: str) -> None:
    """Run where permissions apply (``unprivileged.py``)."""
    root = Path(ws)
    secret = root / "memory/locked.md"
    config = {"provider": "none", "store": {"path": db}, "sync": {"watch": False}}
    secret.chmod(0)
    _settle(root)
    with open_manager(root, config) as first:
        first.sync()
        assert [s.path for s in first.status().skipped] == ["memory/locked.md"]
    secret.chmod(0o644)  # moves no mtime, no size: only an open() can tell
    with open_manager(root, config) as second:
        assert _paths(second.search("vault code kiwi", min_score=0)) == ["memory/locked.md"]
    print("ok")


def test_a_file_that_becomes_readable_is_caught_by_a_new_process(make_ws: Callable[..., Path], tmp_path: Path) -> None:
    ws = make_ws({**NOTES, "memory/locked.md": "# Locked\n- The vault code is kiwi.\n"})
    code = f"from test_freshness import readable_again_in_a_new_process\nreadable_again_in_a_new_process({str(ws)!r}, {str(tmp_path / 'i.sqlite')!r})"
    assert run_where_permissions_apply(code).strip().endswith("ok")


def test_a_sync_that_saw_racy_directories_stores_no_snapshot(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    import apsw

    from mdrecall.freshness.snapshot import DIRS_KEY

    ws = make_ws(NOTES)
    # Racy: modified "now" as the sync sees them, however long it takes to start (a loaded machine).
    future = time.time() + 120.5
    for folder in [ws, *(p for p in ws.rglob("*") if p.is_dir())]:
        os.utime(folder, (future, future))
    config = cfg()
    with open_manager(ws, config) as m:
        m.sync()
    conn = apsw.Connection(config["store"]["path"])
    assert conn.execute("SELECT value FROM meta WHERE key = ?", (DIRS_KEY,)).fetchone() == ("",)
    conn.close()
    with open_manager(ws, config) as second:
        syncs = _counting_syncs(second)
        assert _paths(second.search("amber", min_score=0)) == ["MEMORY.md"]
        assert syncs == ["MainThread"]  # no trustworthy record: a full comparison


def test_a_large_tree_attaches_its_watcher_after_the_first_search(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attaching walks the tree holding the GIL (seconds at 100k files): a large tree's watcher
    waits for the first search to end, so that search does not wait for the walk, and freshness is
    the same: a file changed before anything is watched is still found by that search."""
    from mdrecall.freshness import monitor

    monkeypatch.setattr(monitor, "HOLD_ATTACH_ABOVE_FILES", 2)  # NOTES hold 3 files
    monkeypatch.setattr(monitor, "ATTACH_HOLD_S", 30.0)
    ws = make_ws(NOTES)
    _settle(ws)
    with open_manager(ws, cfg()) as first:
        first.sync()
    with open_manager(ws, cfg(sync={"watch": True})) as m:
        watcher = m.watcher
        assert watcher is not None and watcher.hold is not None
        assert not watcher.wait_ready(0.5) and watcher.attached_at is None  # held: no search yet
        (ws / "MEMORY.md").write_text("# Memory\n- The staging database is called cobra.\n", encoding="utf-8")
        resp = m.search("cobra", min_score=0)
        assert _paths(resp) == ["MEMORY.md"] and not resp.stale
        assert watcher.wait_ready(30) and wait_for(lambda: watcher.attached_at is not None)
        (ws / "memory" / "2026-11-02.md").write_text("# 2026-11-02\n- The queue is called heliotrope.\n")
        assert wait_for(lambda: _indexed_paths(m.search("heliotrope", min_score=0)) == ["memory/2026-11-02.md"])


def test_a_held_watcher_attaches_by_itself_and_small_trees_are_not_held(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdrecall.freshness import monitor

    ws = make_ws(NOTES)
    with open_manager(ws, cfg()) as first:
        first.sync()
    with open_manager(ws, cfg(sync={"watch": True})) as m:
        assert m.watcher is not None and m.watcher.hold is None  # 3 files: attaches at once
        assert m.watcher.wait_ready(30)
    monkeypatch.setattr(monitor, "HOLD_ATTACH_ABOVE_FILES", 2)
    monkeypatch.setattr(monitor, "ATTACH_HOLD_S", 0.5)
    with open_manager(ws, cfg(sync={"watch": True})) as m:  # never searched: attaches after the hold
        assert m.watcher is not None and m.watcher.hold is not None
        assert m.watcher.wait_ready(30) and wait_for(lambda: m.watcher is not None and m.watcher.attached_at is not None)


def _indexed_then_watched(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> tuple[Path, Any]:
    """NOTES written long before, indexed by one manager, then a new manager with the watcher on
    (the caller closes it)."""
    ws = make_ws(NOTES)
    _settle(ws)
    with open_manager(ws, cfg()) as first:
        first.sync()
    return ws, open_manager(ws, cfg(sync={"watch": True}))


def test_opening_does_not_wait_for_the_watcher_and_it_is_trusted_only_after_a_check(
    make_ws: Callable[..., Path], cfg: Callable[..., dict]
) -> None:
    ws, m = _indexed_then_watched(make_ws, cfg)
    try:
        watcher = m.watcher
        assert watcher is not None
        # Changed before the watch could have seen it: the first search must still catch it.
        (ws / "MEMORY.md").write_text("# Memory\n- The staging database is called cobra.\n", encoding="utf-8")
        assert _paths(m.search("cobra", min_score=0)) == ["MEMORY.md"]
        assert watcher.wait_ready(30) and wait_for(lambda: watcher.attached_at is not None)
        # Trusted once a check after the attach finds the files as the last sync saw them; the write
        # above may have been racy for the sync that indexed it, so a search or two may check again.
        assert wait_for(lambda: bool(m.search("cobra", min_score=0).results) and m.monitor._watcher_trusted())
        syncs = _counting_syncs(m)
        for _ in range(5):
            assert _paths(m.search("cobra", min_score=0)) == ["MEMORY.md"]
        assert syncs == [] and m.monitor._watcher_trusted()
    finally:
        m.close()


def test_searches_under_a_trusted_watcher_read_no_file_state_until_it_sees_a_change(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the watcher is trusted and has seen no change, a search takes the citations' line
    lengths it checked before as they were, without a ``stat`` each (which also lets the query
    embedding's thread take the interpreter); any change inside the watched folders, a transcript
    append below the thresholds included, makes the next search check again."""
    import mdrecall.search.filelines as filelines

    stats: list[str] = []

    class CountingOs:
        path = os.path

        @staticmethod
        def stat(path: str) -> os.stat_result:
            stats.append(os.path.basename(path))
            return os.stat(path)

    ws, m = _indexed_then_watched(make_ws, cfg)
    try:
        assert m.watcher is not None and m.watcher.wait_ready(30)
        assert wait_for(lambda: bool(m.search("amber").results) and m.monitor._watcher_trusted())
        token = m.monitor.unchanged_token()
        assert token is not None
        m.search("amber")
        monkeypatch.setattr(filelines, "os", CountingOs)
        reads: list[str] = []
        real_read = filelines.read_inside

        def counting_read(full: str, root: str | None) -> object:
            reads.append(os.path.basename(full))
            return real_read(full, root)

        monkeypatch.setattr(filelines, "read_inside", counting_read)
        for _ in range(3):
            assert _paths(m.search("amber")) == ["MEMORY.md"]
        assert stats == [] and reads == [] and m.monitor.unchanged_token() == token
        (ws / "memory" / "2026-11-01.md").write_text("# 2026-11-01\n- Met Dana about the amber rollout plan.\n", encoding="utf-8")
        assert wait_for(lambda: "memory/2026-11-01.md" in _paths(m.search("amber rollout")) and m.monitor.unchanged_token() is not None)
        assert m.monitor.unchanged_token() != token
        assert "MEMORY.md" in stats  # checked again
        # The sync that indexed the new note kept its lines (SyncContext.on_read): checked, not read.
        assert "2026-11-01.md" in stats and "2026-11-01.md" not in reads
        cached = filelines.lengths_for(ws).names("memory/2026-11-01.md", "memory")
        assert cached is not None and cached.lengths[1] == len("- Met Dana about the amber rollout plan.")
        m.watcher.notify([ws / "MEMORY.md"])  # an event not yet synced: nothing is taken as unchanged
        assert m.monitor.unchanged_token() is None
        assert wait_for(lambda: not m.watcher.has_pending() and m.monitor.unchanged_token() is not None)
        m.mark_dirty()
        assert m.monitor.unchanged_token() is None
    finally:
        m.close()


def test_the_watchers_token_changes_with_every_change_it_sees(tmp_path: Path) -> None:
    from mdrecall.config import parse_config
    from mdrecall.freshness.watcher import MemoryWatcher

    config = parse_config({"sources": ["memory", "sessions"], "sync": {"sessions": {"deltaMessages": 50}}})
    (tmp_path / "memory").mkdir()
    transcript = tmp_path / ".openclaw/sessions/main/transcripts/s.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    watcher = MemoryWatcher(tmp_path, config, lambda paths: None)
    other = MemoryWatcher(tmp_path, config, lambda paths: None)
    first = watcher.seen()
    assert other.seen() != first  # two watchers' tokens never meet
    watcher.notify([tmp_path / "elsewhere" / "x.md"])  # outside the watched folders
    assert watcher.seen() == first
    watcher.notify([transcript])  # the transcript's first event: its size from now on is the baseline
    primed, events = watcher.seen(), watcher.stats.events
    assert primed != first
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write('{"role": "user", "content": "one more"}\n')
    watcher.notify([transcript])  # below deltaMessages: no sync wanted, but a change seen
    assert watcher.stats.events == events and watcher.seen() != primed
    second = watcher.seen()
    watcher.notify([tmp_path / "memory" / "n.md"])
    assert watcher.stats.events == events + 1 and watcher.seen() != second
    third = watcher.seen()
    watcher.attached_at = (watcher.attached_at or 0.0) + 1.0  # the watches attached again (a restart)
    assert watcher.seen() != third  # changes during the re-attach may have gone unseen
