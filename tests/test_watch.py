"""The file watcher against a real filesystem, a real watcher thread and a real index.

Searches run with ``sync.onSearch: false`` so that only the watcher can bring the index up to date:
if the watcher misses a change, the search answers from the old index and the test fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from indexcheck import wait_for
from mdrecall import open_manager
from mdrecall.config import load_config
from mdrecall.freshness.deltas import SessionDeltaTracker
from mdrecall.freshness.roots import RootFilter, is_ignored_name, plan_watch, watch_roots
from mdrecall.freshness.watcher import MemoryWatcher

DEBOUNCE_MS = 200


def _config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "provider": "none",
        "store": {"path": str(tmp_path / "index" / "index.sqlite")},
        "sync": {"onSearch": False, "watchDebounceMs": DEBOUNCE_MS},
    }
    cfg.update(extra)
    return cfg


def _paths(manager: Any, query: str, **kwargs: Any) -> set[str]:
    """The paths the index answers with; a stale answer (the watcher has not synced yet, files not
    indexed were read directly) counts as no answer: these tests wait for the watcher."""
    response = manager.search(query, min_score=0.0, **kwargs)
    return {"<stale>"} if response.stale else {r.path for r in response}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def test_watcher_follows_create_edit_rename_delete_in_new_subdirectories(workspace: Path, tmp_path: Path) -> None:
    # memory/ does not exist yet: the watcher must notice it appear.
    (workspace / "MEMORY.md").write_text("# Memory\n- prefers tea\n", encoding="utf-8")
    with open_manager(workspace, _config(tmp_path), use_global_config=False) as m:
        m.sync()
        syncs: list[list[Path]] = []
        m.monitor.add_sync_reporter(lambda paths, _r, _s: syncs.append(paths))
        watcher = m.watcher  # sync.watch is on by default: the manager's own watcher
        assert watcher is not None
        try:
            assert watcher.running

            # Create: a file in a brand-new nested subdirectory of a brand-new memory/.
            note = workspace / "memory" / "projects" / "alpha" / "kickoff.md"
            note.parent.mkdir(parents=True)
            note.write_text("# Kickoff\nThe codename is zanzibar.\n", encoding="utf-8")
            wait_for(lambda: _paths(m, "zanzibar") == {"memory/projects/alpha/kickoff.md"}, what="create")

            # Edit in place.
            note.write_text("# Kickoff\nThe codename is now quixotic.\n", encoding="utf-8")
            wait_for(
                lambda: _paths(m, "quixotic") == {"memory/projects/alpha/kickoff.md"} and not _paths(m, "zanzibar"),
                what="edit",
            )

            # Rename into another new subdirectory.
            target = workspace / "memory" / "archive" / "2026" / "kickoff-old.md"
            target.parent.mkdir(parents=True)
            os.rename(note, target)
            wait_for(lambda: _paths(m, "quixotic") == {"memory/archive/2026/kickoff-old.md"}, what="rename")

            # Rename a whole directory.
            os.rename(workspace / "memory" / "archive", workspace / "memory" / "old")
            wait_for(lambda: _paths(m, "quixotic") == {"memory/old/2026/kickoff-old.md"}, what="directory rename")

            # Delete.
            (workspace / "memory" / "old" / "2026" / "kickoff-old.md").unlink()
            wait_for(lambda: not _paths(m, "quixotic"), what="delete")

            # The root file is watched too.
            (workspace / "MEMORY.md").write_text("# Memory\n- prefers oolong tea\n", encoding="utf-8")
            wait_for(lambda: _paths(m, "oolong") == {"MEMORY.md"}, what="MEMORY.md edit")

            # Chinese content in a new file: short words must be searchable once the watcher synced.
            (workspace / "memory" / "团队").mkdir()
            (workspace / "memory" / "团队" / "笔记.md").write_text("王磊在北京，喜欢喝咖啡。\n", encoding="utf-8")
            wait_for(lambda: "memory/团队/笔记.md" in _paths(m, "北京"), what="CJK file")

            # Deleting memory/ entirely removes everything under it.
            for path in sorted((workspace / "memory").rglob("*"), reverse=True):
                path.rmdir() if path.is_dir() else path.unlink()
            (workspace / "memory").rmdir()
            wait_for(lambda: not _paths(m, "北京"), what="memory/ removed")

            # ...and a recreated memory/ is watched again.
            (workspace / "memory" / "again").mkdir(parents=True)
            (workspace / "memory" / "again" / "back.md").write_text("phoenix returns\n", encoding="utf-8")
            wait_for(lambda: _paths(m, "phoenix") == {"memory/again/back.md"}, what="memory/ recreated")

            assert watcher.stats.errors == 0
            assert syncs, "syncs were reported"
        finally:
            watcher.stop()
        assert not watcher.running
        # With the watcher gone, the index still equals what a fresh sync produces.
        assert m.status().clean


def test_ignored_files_do_not_trigger_syncs(workspace: Path, tmp_path: Path) -> None:
    (workspace / "memory").mkdir()
    calls: list[list[Path]] = []
    config = load_config(workspace, _config(tmp_path), use_global=False)
    with MemoryWatcher(workspace, config, calls.append, debounce_ms=100):
        for rel in [
            "memory/.note.md.swp",
            "memory/note.md~",
            "memory/.#note.md",
            "memory/4913",
            "memory/draft.tmp",
            "memory/picture.png",
            "memory/node_modules/pkg/readme.md",
            "memory/.git/HEAD",
            "memory/.dreams/short-term-recall.json",
            "notes.md",  # outside the indexed roots
        ]:
            path = workspace / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x", encoding="utf-8")
        # A real change afterwards proves the watcher was listening; only it may be reported
        # (plus the directories created along the way, which never name an ignored file).
        (workspace / "memory" / "real.md").write_text("real", encoding="utf-8")
        wait_for(lambda: any(p.name == "real.md" for batch in calls for p in batch), what="real change")
        reported = {p for batch in calls for p in batch}
    names = {p.name for p in reported}
    assert names <= {"real.md", "pkg"} | {"memory"}, names
    assert not any(part in {"node_modules", ".git", ".dreams"} for p in reported for part in p.parts)


def test_debounce_batches_a_burst(workspace: Path, tmp_path: Path) -> None:
    (workspace / "memory").mkdir()
    calls: list[tuple[float, list[Path]]] = []
    config = load_config(workspace, _config(tmp_path), use_global=False)
    with MemoryWatcher(workspace, config, lambda paths: calls.append((time.monotonic(), paths)), debounce_ms=1500):
        for i in range(20):
            (workspace / "memory" / f"n{i}.md").write_text(f"note {i}", encoding="utf-8")
            time.sleep(0.02)
        last_write = time.monotonic()
        wait_for(lambda: sum(len(b) for _, b in calls) >= 20, what="burst reported")
    # The burst is reported together, and only after a quiet period (a lower bound: a slow machine
    # can only make the callback later, never earlier).
    assert len(calls) <= 2
    assert {p.name for _, batch in calls for p in batch} == {f"n{i}.md" for i in range(20)}
    assert calls[-1][0] - last_write >= 1.5 * 0.9


def test_callback_errors_do_not_kill_the_watcher(workspace: Path, tmp_path: Path) -> None:
    (workspace / "memory").mkdir()
    seen: list[list[Path]] = []

    def flaky(paths: list[Path]) -> None:
        seen.append(paths)
        if len(seen) == 1:
            raise RuntimeError("sync exploded")

    config = load_config(workspace, _config(tmp_path), use_global=False)
    with MemoryWatcher(workspace, config, flaky, debounce_ms=100) as watcher:
        (workspace / "memory" / "a.md").write_text("a", encoding="utf-8")
        wait_for(lambda: len(seen) >= 1, what="first callback")
        (workspace / "memory" / "b.md").write_text("b", encoding="utf-8")
        wait_for(lambda: len(seen) >= 2, what="second callback")
        assert watcher.running
        assert watcher.status()["errors"] == 1


def test_polling_fallback_sees_new_subdirectories(workspace: Path, tmp_path: Path) -> None:
    (workspace / "memory").mkdir()
    calls: list[list[Path]] = []
    config = load_config(workspace, _config(tmp_path), use_global=False)
    with MemoryWatcher(workspace, config, calls.append, debounce_ms=100, force_polling=True) as watcher:
        assert watcher.status()["polling"]
        (workspace / "memory" / "x" / "y").mkdir(parents=True)
        (workspace / "memory" / "x" / "y" / "z.md").write_text("z", encoding="utf-8")
        wait_for(lambda: any(p.name == "z.md" for batch in calls for p in batch), what="polled change")


def test_extra_paths_and_sessions_are_watched(workspace: Path, tmp_path: Path) -> None:
    notes = tmp_path / "shared-notes"
    notes.mkdir()
    single = tmp_path / "single" / "runbook.md"
    single.parent.mkdir()
    single.write_text("restore from snapshot\n", encoding="utf-8")
    cfg = _config(tmp_path, extraPaths=[str(notes), str(single)], sources=["memory", "sessions"])
    with open_manager(workspace, cfg, use_global_config=False) as m:
        m.sync()
        watcher = m.watcher
        assert watcher is not None and watcher.running
        try:
            (notes / "sub").mkdir()
            (notes / "sub" / "glossary.md").write_text("mise en place means everything in its place\n", encoding="utf-8")
            wait_for(lambda: any(p.endswith("glossary.md") for p in _paths(m, "mise en place")), what="extra dir")

            single.write_text("restore from snapshot, then verify checksums\n", encoding="utf-8")
            wait_for(lambda: bool(_paths(m, "checksums")), what="extra file")

            # A new session appears in a sessions dir that did not exist at start.
            transcripts = workspace / ".openclaw" / "sessions" / "chat-7" / "transcripts"
            transcripts.mkdir(parents=True)
            line = {"type": "message", "message": {"role": "user", "content": "remember the wifi is pebble-guest"}}
            (transcripts / "t1.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
            wait_for(lambda: bool(_paths(m, "pebble-guest", session_key="chat-7")), what="new transcript")
            assert not _paths(m, "pebble-guest", session_key="someone-else")
        finally:
            watcher.stop()


def test_mdrecall_watch_cli(workspace: Path, tmp_path: Path) -> None:
    (workspace / "memory").mkdir()
    (workspace / "memory" / "a.md").write_text("alpha\n", encoding="utf-8")
    env = {**os.environ, "MDRECALL_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "mdrecall.cli", "watch", "-w", str(workspace), "-c", "provider=none",
           "--debounce-ms", "200"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(lambda: any(line.startswith("watching") for line in lines), what="watch start")
        assert any("initial sync" in line and "indexed 1" in line for line in lines), lines
        (workspace / "memory" / "new").mkdir()
        (workspace / "memory" / "new" / "b.md").write_text("beta\n", encoding="utf-8")
        wait_for(lambda: any("sync after" in line and "indexed 1" in line for line in lines), what="sync line")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert rc == 0, lines
    out = subprocess.run(
        [sys.executable, "-m", "mdrecall.cli", "search", "-w", str(workspace), "-c", "provider=none", "beta", "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert "memory/new/b.md" in out.stdout


# -- pieces without threads -----------------------------------------------------------------------


@pytest.mark.parametrize("name", [".x.md.swp", "x.md.swo", "x.md~", ".#x.md", "4913", "x.tmp", "#x.md#"])
def test_temp_names_are_ignored(name: str) -> None:
    assert is_ignored_name(name)


@pytest.mark.parametrize("name", ["x.md", "2026-11-14.md", "团队笔记.md", "t.jsonl"])
def test_real_names_are_not_ignored(name: str) -> None:
    assert not is_ignored_name(name)


def test_root_filter_and_plan(workspace: Path, tmp_path: Path) -> None:
    (workspace / "memory").mkdir()
    config = load_config(workspace, _config(tmp_path, sources=["memory", "sessions"]), use_global=False)
    roots = watch_roots(workspace, config)
    f = RootFilter(roots)
    assert f.accepts(workspace / "MEMORY.md")
    assert not f.accepts(workspace / "README.md")
    assert f.accepts(workspace / "memory" / "a" / "b.md")
    assert f.accepts(workspace / "memory" / "newdir")
    assert not f.accepts(workspace / "memory" / "a.txt")
    assert not f.accepts(workspace / "memory" / ".dreams" / "x.md")
    assert f.accepts(workspace / ".openclaw" / "sessions" / "k" / "transcripts" / "t.jsonl")
    assert not f.accepts(workspace / ".openclaw" / "sessions" / "k" / "transcripts" / "t.jsonl.reset.2026-01-01T00-00-00Z")
    plan = plan_watch(roots)
    assert plan.recursive == [workspace / "memory"]
    assert workspace in plan.shallow  # MEMORY.md, and the ancestor of the missing sessions dir
    assert workspace / ".openclaw" / "sessions" in plan.missing


def _append(path: Path, n: int, size: int = 20) -> None:
    with path.open("a", encoding="utf-8") as fh:
        for _ in range(n):
            fh.write(json.dumps({"role": "user", "content": "x" * size}) + "\n")


def test_session_delta_tracker_messages(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    _append(t, 3)
    tracker = SessionDeltaTracker(delta_bytes=100_000, delta_messages=5)
    assert tracker.observe(t)  # first sight: index now
    _append(t, 2)
    assert not tracker.observe(t)
    assert tracker.pending()[t].pending_messages == 2
    assert tracker.pending_files() == [t]
    _append(t, 2)
    assert not tracker.observe(t)
    _append(t, 1)
    assert tracker.observe(t)  # 5 messages since the last index
    assert tracker.pending()[t].pending_messages == 0
    assert not tracker.observe(t)  # nothing new


def test_session_delta_tracker_bytes_shrink_delete(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    _append(t, 1)
    tracker = SessionDeltaTracker(delta_bytes=1000, delta_messages=1000)
    tracker.prime([t])
    _append(t, 1, size=400)
    assert not tracker.observe(t)
    _append(t, 1, size=700)
    assert tracker.observe(t)  # > 1000 bytes appended
    t.write_text("{}\n", encoding="utf-8")  # rewritten shorter
    assert tracker.observe(t)
    t.unlink()
    assert tracker.observe(t)  # a known file vanished: its rows must go
    assert not tracker.observe(t)  # already forgotten


def test_session_delta_tracker_zero_threshold_means_any_growth(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    _append(t, 1)
    tracker = SessionDeltaTracker(delta_bytes=0, delta_messages=0)
    tracker.mark_indexed(t)
    assert not tracker.observe(t)
    _append(t, 1)
    assert tracker.observe(t)


def test_session_delta_tracker_from_config(workspace: Path, tmp_path: Path) -> None:
    config = load_config(workspace, _config(tmp_path, sync={"sessions": {"deltaBytes": 7, "deltaMessages": 3}}),
                         use_global=False)
    tracker = SessionDeltaTracker.from_config(config)
    assert (tracker.delta_bytes, tracker.delta_messages) == (7, 3)
