"""A sync scoped to what moved since a trusted snapshot (index/scope.py): what it looks at, what it
leaves to the full walk, and that it leaves the index as a full sync would."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from indexcheck import counting_walks
from mdrecall import open_manager
from mdrecall.builtin.manager import BuiltinMemoryManager
from mdrecall.freshness.snapshot import Snapshot
from mdrecall.index.indexer import Indexer
from mdrecall.index.scope import plan_scope

NOTES = {
    "MEMORY.md": "# Memory\n- The staging database is called amber.\n",
    "memory/projects/atlas.md": "# Atlas\n- Atlas ships in March.\n",
    "memory/2026-11-01.md": "# 2026-11-01\n- The quarterly roadmap was agreed.\n",
}


def _settle(root: Path) -> None:
    """Every file and folder modified a minute ago: nothing is racy for the syncs that follow."""
    past = time.time() - 60
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past))


def _rows(m: BuiltinMemoryManager) -> tuple[Any, ...]:
    with m.index.reading() as db:
        files = sorted((r.path, r.hash, r.mtime, r.size) for r in db.files().values())
        chunks = db.conn.execute("SELECT path, start_line, end_line, hash FROM chunks ORDER BY path, start_line").fetchall()
        return files, chunks, sorted(db.skipped())


def _plan(m: BuiltinMemoryManager, snapshot: Any, other_sources: bool = False) -> Any:
    with m.index.reading() as db:
        return plan_scope(m.workspace, m.config, snapshot, None, db, other_sources=other_sources)


def _counting_looks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``stat`` of all of a snapshot's files from now on (``Snapshot.delta``), one entry each."""
    looks: list[int] = []
    delta = Snapshot.delta
    monkeypatch.setattr(Snapshot, "delta", lambda self: looks.append(1) or delta(self))
    return looks


def _common_changes(ws: Path) -> list[tuple[Callable[[], Any], str, list[str]]]:
    """(change, query, the paths the search must then return): an edit, a new note, a new folder, a
    deletion, a rename."""
    return [
            (lambda: (ws / "memory/projects/atlas.md").open("a").write("- The launch review is on Tuesday.\n"),
             "launch review", ["memory/projects/atlas.md"]),
            (lambda: (ws / "memory/2026-11-03.md").write_text("# 2026-11-03\n- The walrus audit is booked.\n"),
             "walrus audit", ["memory/2026-11-03.md"]),
            (lambda: [(ws / "memory/archive/deep").mkdir(parents=True),
                      (ws / "memory/archive/deep/old.md").write_text("# Old\n- The heliotrope queue was retired.\n")],
             "heliotrope", ["memory/archive/deep/old.md"]),
            (lambda: (ws / "memory/2026-11-03.md").unlink(), "walrus audit", []),
            (lambda: (ws / "memory/projects/atlas.md").rename(ws / "memory/projects/atlas-v2.md"),
             "launch review", ["memory/projects/atlas-v2.md"]),
    ]  # fmt: skip


def test_searches_of_a_long_lived_process_sync_what_moved(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a watcher, between full walks (``sync.reconcileIntervalMs``), a search that finds the
    files moved syncs what moved: an edit, a new note, a new folder, a deletion, a rename."""
    ws = make_ws(NOTES)
    _settle(ws)
    with open_manager(ws, cfg(sync={"reconcileIntervalMs": 600_000})) as m:
        m.sync()
        walks = counting_walks(monkeypatch)
        looks = _counting_looks(monkeypatch)
        steps = _common_changes(ws)
        for change, query, expected in steps:
            change()
            time.sleep(0.1)  # past the racy window: each sync leaves a snapshot the next may start from
            resp = m.search(query, min_score=0)
            assert [r.path for r in resp.results] == expected and not resp.stale
        assert walks == []
        assert len(looks) == len(steps)  # one stat of every file a search: the check's, reused by its sync
        scoped = _rows(m)
        m.sync()
        assert walks and _rows(m) == scoped and m.last_report is not None and m.last_report.files_indexed == 0


def test_a_sync_of_what_moved_looks_only_at_those_files(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its cost follows what moved, not the workspace: it examines the one edited note, and the
    snapshot it leaves (the earlier one's other entries, with the examined note as seen now) is the
    one a full comparison of every file makes."""
    topics = {f"memory/topics/t{i}.md": f"# Topic {i}\n- Topic {i} is settled.\n" for i in range(30)}
    ws = make_ws({**NOTES, **topics})
    _settle(ws)
    with open_manager(ws, cfg(sync={"reconcileIntervalMs": 600_000})) as m:
        m.sync()
        examined: list[list[str]] = []
        run = Indexer.run

        def spy(self: Indexer, full: bool = False, scope: Any = None) -> Any:
            report = run(self, full, scope)
            examined.append(sorted(self.observed))
            return report

        monkeypatch.setattr(Indexer, "run", spy)
        edited = ws / "memory/projects/atlas.md"
        with edited.open("a") as fh:
            fh.write("- The launch review is on Tuesday.\n")
        time.sleep(0.1)  # past the racy window
        assert [r.path for r in m.search("launch review", min_score=0).results] == ["memory/projects/atlas.md"]
        assert examined == [[str(edited)]]
        report = m.last_report
        assert report is not None and (report.files_scanned, report.files_unchanged, report.files_indexed) == (33, 32, 1)
        left = m.monitor._snapshot
        full = m.compare_with_files()
        assert left is not None and not left.racy and left.dirs == full.dirs
        assert sorted(entry[:3] for entry in left.files) == sorted((p, o[0], o[1]) for p, o in full.observed.items())


def test_a_full_walk_still_comes_when_it_is_due(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = make_ws(NOTES)
    _settle(ws)
    with open_manager(ws, cfg(sync={"reconcileIntervalMs": 0})) as m:
        m.sync()
        walks = counting_walks(monkeypatch)
        (ws / "memory/2026-11-03.md").write_text("# 2026-11-03\n- The walrus audit is booked.\n")
        assert [r.path for r in m.search("walrus audit", min_score=0).results] == ["memory/2026-11-03.md"]
        assert walks == [4]


@pytest.mark.parametrize("case", ["link", "hard link", "extra path", "sessions beside", "incomplete"])
def test_what_only_the_full_walk_decides(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path, case: str
) -> None:
    """Links (discovery's rules for them span every file), files with other names, folders outside
    memory/, the workspace folder while transcripts may appear in it, an index whose last sync left
    work undone: no scope, and the search that follows still finds the change (by the full walk)."""
    ws = make_ws(NOTES)
    (ws / "notes").mkdir()
    config = cfg(extraPaths=["notes"]) if case == "extra path" else cfg()
    _settle(ws)
    with open_manager(ws, config) as m:
        m.sync()
        snapshot = m.stored_snapshot()
        assert snapshot is not None
        time.sleep(0.1)
        (ws / "memory/2026-11-04.md").write_text("# 2026-11-04\n- A plain new note about otters.\n")
        time.sleep(0.1)
        # The plain case is scoped, the cases below are not; with extraPaths, nothing is.
        assert (_plan(m, snapshot) is None) == (case == "extra path")
        expected = "memory/2026-11-04.md"
        other_sources = False
        if case == "link":
            (ws / "memory/link.md").symlink_to(ws / "memory/2026-11-04.md")
        elif case == "hard link":
            os.link(ws / "memory/2026-11-04.md", tmp_path / "outside.md")
        elif case == "extra path":
            (ws / "notes/otters.md").write_text("# Otters\n- The otter census is on Friday.\n")
            expected = "notes/otters.md"
        elif case == "sessions beside":
            (ws / "TODO.txt").write_text("not a memory file\n")  # the workspace folder moved
            other_sources = True
        else:
            with m.index.reading() as db, db.conn:
                db.set_kv("freshness_dirs", "")
        time.sleep(0.1)
        assert _plan(m, snapshot, other_sources) is None
        hits = [r.path for r in m.search("otter census" if case == "extra path" else "otters", min_score=0).results]
        if case == "hard link":
            assert expected not in hits  # another name outside the memory paths: never indexed
        else:
            assert expected in hits


def test_a_deleted_folder_and_a_skipped_file(make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder removed with its notes, and a file the index skips (not UTF-8) that is later fixed."""
    ws = make_ws({**NOTES, "memory/old/a.md": "# A\n- The albatross memo.\n", "memory/bad.md": b"\xff\xfe not text"})
    _settle(ws)
    with open_manager(ws, cfg(sync={"reconcileIntervalMs": 600_000})) as m:
        m.sync()
        assert "memory/bad.md" in _rows(m)[2]
        walks = counting_walks(monkeypatch)
        for name in ("a.md",):
            (ws / "memory/old" / name).unlink()
        (ws / "memory/old").rmdir()
        (ws / "memory/bad.md").write_text("# Fixed\n- The pelican memo.\n")
        time.sleep(0.1)
        assert all(r.path != "memory/old/a.md" for r in m.search("albatross memo", min_score=0).results)
        assert [r.path for r in m.search("pelican memo", min_score=0).results] == ["memory/bad.md"]
        assert walks == []
        scoped = _rows(m)
        assert "memory/bad.md" not in scoped[2]
        m.sync()
        assert _rows(m) == scoped


def test_random_changes_leave_the_index_a_full_sync_would_build(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeded random edits, appends, creations (in new folders too), deletions and renames, each
    followed by a search: the index the scoped syncs leave equals a fresh full index of the same files."""
    import random

    rng = random.Random(7)
    ws = make_ws(NOTES)
    _settle(ws)
    words = ["otter", "walrus", "heron", "badger", "lynx", "marten", "pelican", "stoat"]
    with open_manager(ws, cfg(sync={"reconcileIntervalMs": 600_000})) as m:
        m.sync()
        walks = counting_walks(monkeypatch)
        for step in range(30):
            notes = sorted(p for p in (ws / "memory").rglob("*.md"))
            op = rng.choice(["edit", "append", "new", "new folder", "delete", "rename"] if notes else ["new"])
            line = f"- The {rng.choice(words)} count {step} was {rng.randint(1, 99)}.\n"
            if op == "edit":
                rng.choice(notes).write_text(f"# Note {step}\n{line}")
            elif op == "append":
                with rng.choice(notes).open("a") as fh:
                    fh.write(line)
            elif op == "new":
                (ws / f"memory/n{step}.md").write_text(f"# N{step}\n{line}")
            elif op == "new folder":
                folder = ws / f"memory/f{step}/g{step}"
                folder.mkdir(parents=True)
                (folder / "deep.md").write_text(f"# Deep {step}\n{line}")
            elif op == "delete":
                rng.choice(notes).unlink()
            else:
                source = rng.choice(notes)
                source.rename(source.with_name(f"moved-{step}.md"))
            time.sleep(0.06)  # past the racy window, so each sync leaves a snapshot to start from
            assert not m.search(rng.choice(words), min_score=0).stale
        scoped = _rows(m)
        assert walks == []
    time.sleep(0.1)
    with open_manager(ws, cfg(db="fresh.sqlite")) as fresh:
        fresh.sync()
        assert _rows(fresh) == scoped


def test_a_trusted_watchers_events_name_what_moved(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the watcher is trusted, a sync starts from what its events name (one ``stat`` of each
    named file and of the folders holding them) instead of a ``stat`` of every file: edits, new
    notes and folders, deletions, renames, a folder moved out of the tree (one event for all its
    notes) and one moved in. No full look, no full walk, and the index equals a fresh full one."""
    from indexcheck import wait_for

    ws = make_ws(NOTES)
    _settle(ws)
    config = cfg(sync={"watch": True, "watchDebounceMs": 5_000, "reconcileIntervalMs": 600_000, "watchReconcileIntervalMs": 0})
    outside = tmp_path / "outside"
    (outside / "incoming/sub").mkdir(parents=True)
    (outside / "incoming/sub/n.md").write_text("# Incoming\n- The osprey ledger arrived.\n")
    with open_manager(ws, config) as m:
        m.sync()
        assert wait_for(lambda: bool(m.search("amber").results) and m.monitor._watcher_trusted(), what="a trusted watcher")
        walks = counting_walks(monkeypatch)
        looks = _counting_looks(monkeypatch)
        watcher = m.monitor.watcher
        assert watcher is not None
        attaches = [watcher.attached_at]
        steps = [
            *_common_changes(ws),
            (lambda: (ws / "memory/archive").rename(outside / "archive"), "heliotrope", []),
            (lambda: (outside / "incoming").rename(ws / "memory/incoming"), "osprey ledger", ["memory/incoming/sub/n.md"]),
            (lambda: (ws / "MEMORY.md").write_text("# Memory\n- The staging database is called cobalt.\n"),
             "cobalt", ["MEMORY.md"]),
        ]  # fmt: skip
        for change, query, expected in steps:
            change()
            # The events are in (the watcher's own sync waits out its 5 s debounce); past the racy window.
            assert wait_for(lambda: m.monitor.watcher is not None and m.monitor.watcher.has_pending(), what="the events")
            time.sleep(0.1)
            resp = m.search(query, min_score=0)
            assert [r.path for r in resp.results] == expected and not resp.stale, query
            if watcher.attached_at not in (None, attaches[-1]):  # (None: attaching now)
                attaches.append(watcher.attached_at)
        # A watcher that had to attach again (an error under load restarts it) is trusted again after
        # one full look, as ever: that look is the only one allowed, and never a walk.
        assert len(looks) <= len(attaches) - 1 and walks == [], (looks, walks, watcher.stats)
        scoped = _rows(m)
        left, full = m.monitor._snapshot, m.compare_with_files()  # what the next sync starts from
        assert left is not None and left.dirs == full.dirs
        assert sorted(entry[:3] for entry in left.files) == sorted((p, o[0], o[1]) for p, o in full.observed.items())
    with open_manager(ws, cfg(db="fresh.sqlite")) as fresh:
        fresh.sync()
        assert _rows(fresh) == scoped


def test_events_the_snapshot_cannot_place_and_writes_of_this_process(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full look decides where the events cannot: a path outside every folder the snapshot knows,
    a racy snapshot, and a search right after this process wrote a note (it marks the index dirty;
    the write's event may not have arrived yet)."""
    from indexcheck import wait_for

    ws = make_ws(NOTES)
    _settle(ws)
    with open_manager(ws, cfg(sync={"watch": True, "watchDebounceMs": 5_000, "watchReconcileIntervalMs": 0})) as m:
        m.sync()
        assert wait_for(lambda: bool(m.search("amber").results) and m.monitor._watcher_trusted(), what="a trusted watcher")
        snapshot = m.monitor._snapshot
        assert snapshot is not None
        assert snapshot.delta_of([str(tmp_path / "elsewhere/x.md")]) is None
        moved = snapshot.delta_of([str(ws / "memory/projects/atlas.md")])
        assert moved is not None and not moved.moved
        assert Snapshot(files=snapshot.files, dirs=snapshot.dirs, racy=True).delta_of([]) is None
        watcher = m.monitor.watcher
        assert watcher is not None
        monkeypatch.setattr(watcher, "pending_paths", lambda: [])  # the write's event has not arrived
        (ws / "memory/2026-11-06.md").write_text("# 2026-11-06\n- The bittern survey was filed.\n")
        time.sleep(0.1)
        m.mark_dirty(["memory/2026-11-06.md"])
        assert [r.path for r in m.search("bittern survey", min_score=0).results] == ["memory/2026-11-06.md"]
        # A watcher's sync while the index is dirty (an earlier one failed after its events were
        # spent): it looks at every file, not only at its own batch.
        (ws / "memory/2026-11-07.md").write_text("# 2026-11-07\n- The curlew count was 40.\n")
        time.sleep(0.1)
        m.monitor.mark_dirty()
        m.monitor._on_change([ws / "memory/projects/atlas.md"])
        with m.index.reading() as db:
            assert "memory/2026-11-07.md" in db.files()


def _message(text: str) -> str:
    return json.dumps({"role": "user", "content": text}) + "\n"


def test_transcripts_among_the_sources(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With transcripts a source too, an append to a known transcript is a change like an edit: a
    search's sync examines it without listing every file, and an append below the thresholds that it
    leaves for later is examined again by the next sync (a watcher's, which indexes it), as a full
    walk would. A new session's folder is a folder outside memory/: the full walk's. The index the
    scoped syncs leave equals a fresh full index of the same files."""
    transcript = ".openclaw/sessions/main/transcripts/s.jsonl"
    ws = make_ws({**NOTES, transcript: _message("The kestrel cluster runs in Frankfurt.")})
    _settle(ws)
    config = cfg(sources=["memory", "sessions"], dreaming={"enabled": False},
                 sync={"reconcileIntervalMs": 600_000, "sessions": {"deltaMessages": 3, "deltaBytes": 100_000}})  # fmt: skip
    with open_manager(ws, config) as m:
        m.sync()
        m.search("kestrel", min_score=0, session_key="main")  # the session's start: a full sync of its own
        walks = counting_walks(monkeypatch)

        def indexed_size() -> int:
            with m.index.reading() as db:
                return db.files()[transcript].size

        def append(*texts: str) -> None:
            with (ws / transcript).open("a") as fh:
                fh.writelines(_message(text) for text in texts)
            time.sleep(0.1)  # past the racy window

        append("The osprey backup runs at noon.")  # one message: below deltaMessages
        assert not m.search("kestrel", min_score=0, session_key="main").stale
        assert m.last_report is not None and m.last_report.files_deferred == 1 and walks == []
        assert indexed_size() < (ws / transcript).stat().st_size
        snapshot = m.monitor._snapshot
        assert snapshot is not None and snapshot.deferred == {str(ws / transcript)}
        m.status()  # a full comparison: its snapshot replaces the sync's, and knows the same
        assert m.monitor._snapshot is not snapshot and m.monitor._snapshot.deferred == snapshot.deferred
        # The watcher's sync of its events: transcripts' appends now, from the snapshot.
        m.monitor._sync(lock_timeout=None, defer_sessions=False, base=m.monitor._sync_base(checked=False))
        assert walks == [] and indexed_size() == (ws / transcript).stat().st_size
        assert m.monitor._snapshot is not None and not m.monitor._snapshot.deferred
        assert [r.path for r in m.search("osprey backup", min_score=0, session_key="main").results] == [transcript]
        append("The heron survey is on Monday.", "The lynx count was 12.", "The stoat den moved.")  # at deltaMessages
        assert [r.path for r in m.search("stoat den", min_score=0, session_key="main").results] == [transcript]
        assert indexed_size() == (ws / transcript).stat().st_size and walks == []
        other = ws / ".openclaw/sessions/ops/transcripts/t.jsonl"
        other.parent.mkdir(parents=True)
        other.write_text(_message("The pelican queue was drained."))
        time.sleep(0.1)
        m.search("pelican", min_score=0)
        assert len(walks) == 1  # a new session's folder: the full walk finds it
        scoped = _rows(m)
    with open_manager(ws, cfg(db="fresh.sqlite", sources=["memory", "sessions"], dreaming={"enabled": False})) as fresh:
        fresh.sync()
        assert _rows(fresh) == scoped


def test_transcripts_with_a_trusted_watcher(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With transcripts among the sources, a sync from a trusted watcher's events also looks at every
    transcript: an append below the thresholds raises no event, and a search's sync leaves it for
    later while the watcher's sync indexes it, as after a full look. No full look, no walk."""
    from indexcheck import wait_for

    transcript = ".openclaw/sessions/main/transcripts/s.jsonl"
    ws = make_ws({**NOTES, transcript: _message("The kestrel cluster runs in Frankfurt.")})
    _settle(ws)
    config = cfg(sources=["memory", "sessions"], dreaming={"enabled": False},
                 sync={"watch": True, "watchDebounceMs": 5_000, "watchReconcileIntervalMs": 0,
                       "sessions": {"deltaMessages": 3, "deltaBytes": 100_000}})  # fmt: skip
    with open_manager(ws, config) as m:
        m.sync()
        assert wait_for(lambda: bool(m.search("kestrel", session_key="main").results) and m.monitor._watcher_trusted(),
                        what="a trusted watcher")  # fmt: skip
        walks = counting_walks(monkeypatch)
        looks = _counting_looks(monkeypatch)
        with (ws / transcript).open("a") as fh:
            fh.write(_message("The osprey backup runs at noon."))  # below deltaMessages: no event
        note = ws / "memory/projects/atlas.md"
        with note.open("a") as fh:
            fh.write("- The launch review is on Tuesday.\n")
        watcher = m.monitor.watcher
        assert watcher is not None and wait_for(watcher.has_pending, what="the note's event")
        time.sleep(0.1)
        assert [r.path for r in m.search("launch review", min_score=0, session_key="main").results] == [str(note.relative_to(ws))]
        assert m.last_report is not None and m.last_report.files_deferred == 1
        m.monitor._on_change([note])  # the watcher's sync: transcripts' appends now
        with m.index.reading() as db:
            assert db.files()[transcript].size == (ws / transcript).stat().st_size
        assert [r.path for r in m.search("osprey backup", min_score=0, session_key="main").results] == [transcript]
        assert looks == [] and walks == []
        scoped = _rows(m)
    with open_manager(ws, cfg(db="fresh.sqlite", sources=["memory", "sessions"], dreaming={"enabled": False})) as fresh:
        fresh.sync()
        assert _rows(fresh) == scoped


def test_another_writer_between_a_new_processs_check_and_its_sync(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new process's snapshot comes from the index's rows (no ctimes). Between its check and its
    sync, another process syncs a note away and the note comes back with its old mtime and size (a
    restore that keeps times): the snapshot would call it unmoved, but the index no longer holds it.
    The index changed under the snapshot, so the sync walks everything and finds it."""
    ws = make_ws(NOTES)
    _settle(ws)
    note = ws / "memory/projects/atlas.md"
    text, st = note.read_text(), note.stat()
    with open_manager(ws, cfg()) as first:
        first.sync()
    (ws / "memory/2026-11-05.md").write_text("# 2026-11-05\n- The osprey nest was counted.\n")
    time.sleep(0.1)
    walks = counting_walks(monkeypatch)
    with open_manager(ws, cfg()) as m:
        sync = m.monitor._sync

        def another_writer_first(**kwargs: Any) -> Any:
            note.unlink()
            time.sleep(0.1)  # so that its sync stores a record of the folders (not racy)
            with open_manager(ws, cfg()) as other:
                other.sync()
            note.write_text(text)
            os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))
            walks.clear()
            return sync(**kwargs)

        monkeypatch.setattr(m.monitor, "_sync", another_writer_first)
        assert [r.path for r in m.search("osprey nest", min_score=0).results] == ["memory/2026-11-05.md"]
        assert walks  # not scoped
        assert [r.path for r in m.search("Atlas ships", min_score=0).results][:1] == ["memory/projects/atlas.md"]
