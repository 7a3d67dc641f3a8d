"""Crash safety: kill -9 during syncs and rebuilds, and corrupt database files.

A child process (forked, so it starts in milliseconds) runs a sync and dies abruptly either at a
labelled point (``MDRECALL_TEST_CRASH_AT``, see mdrecall/crashpoints.py: ``os._exit``, no cleanup)
or from a SIGKILL after a random delay. Afterwards the index must pass SQLite's integrity check,
open and answer searches, hold either the old or the new index after an interrupted rebuild (never
a mix), and the next sync must produce exactly what a fresh full index holds. The user's files are
hashed before and after: nothing under the workspace may change.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from indexcheck import diff, fresh_index, hash_tree, index_content, integrity
from mdrecall import open_manager
from mdrecall.crashpoints import CRASH_EXIT_CODE, ENV_VAR

WORDS = ["amber", "cobra", "delta", "ember", "fjord", "gecko", "heron", "indigo", "jasper", "kestrel"]


def _config(store: Path, **extra: Any) -> dict[str, Any]:
    return {"provider": "none", "sources": ["memory", "sessions"], "store": {"path": str(store)},
            "dreaming": {"enabled": False}, **extra}


def _seed(ws: Path, files: int = 60) -> None:
    rng = random.Random(11)
    (ws / "memory" / "deep").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- The staging database is called amber.\n")
    for i in range(files):
        folder = ws / "memory" / ("deep" if i % 2 else "")
        body = "".join(f"- Item {i}.{j}: {rng.choice(WORDS)} {rng.choice(WORDS)}.\n" for j in range(rng.randint(5, 80)))
        (folder / f"2026-09-{i % 28 + 1:02d}-{i}.md").write_text(f"# Note {i}\n\n{body}")
    transcript = ws / ".openclaw/sessions/main/transcripts/t.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("".join(f'{{"role": "user", "content": "message {i} {WORDS[i % 10]}"}}\n' for i in range(200)))


def _mutate(ws: Path, round_: int) -> None:
    """Changes for an incremental sync to work through: edits, new files, deletions."""
    notes = sorted((ws / "memory").rglob("*.md"))
    for i, path in enumerate(notes[:: 5]):
        path.write_text(path.read_text() + f"- Round {round_} change {i}: {WORDS[(i + round_) % 10]}.\n")
    for i in range(5):
        (ws / "memory" / "deep" / f"new-{round_}-{i}.md").write_text(f"# New {round_}.{i}\n- {WORDS[i]} arrives.\n")
    for path in notes[1::9]:
        path.unlink()
    with (ws / ".openclaw/sessions/main/transcripts/t.jsonl").open("a") as fh:
        fh.write(f'{{"role": "assistant", "content": "round {round_} reply"}}\n')


def _child(ws: str, config: dict[str, Any], force: bool, crash_at: str | None) -> None:
    if crash_at:
        os.environ[ENV_VAR] = crash_at
    with open_manager(ws, config, use_global_config=False) as m:
        m.sync(force=force)
    os._exit(0)


def _run_child(ws: Path, config: dict[str, Any], *, force: bool = False, crash_at: str | None = None,
               kill_after: float | None = None) -> int | None:
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_child, args=(str(ws), config, force, crash_at))
    proc.start()
    if kill_after is not None:
        time.sleep(kill_after)
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
    proc.join(60)
    assert not proc.is_alive(), "child hung"
    return proc.exitcode


def _check_usable(ws: Path, store: Path, config: dict[str, Any]) -> None:
    """After a crash: integrity, a working search without syncing, then a sync to a fresh-equal index.
    A child killed before it opened the index leaves no file at all, which is a valid outcome too."""
    if store.exists():
        assert integrity(store) == "ok"
    no_sync = {**config, "sync": {"onSearch": False, "onSessionStart": False}}
    with open_manager(ws, no_sync, use_global_config=False) as m:
        m.search("staging database", min_score=0)  # answers (possibly stale), never raises
        assert m.status().details["recovered"] is None
    with open_manager(ws, config, use_global_config=False) as m:
        m.sync()
        assert m.status().clean is True
    assert not list(store.parent.glob(store.name + ".rebuild-*")), "rebuild leftovers were not cleaned"
    assert integrity(store) == "ok"


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    _seed(ws)
    return ws, tmp_path / "idx" / "index.sqlite"


INCREMENTAL_POINTS = ["sync:locked", "index:file-written@1", "index:file-written@7", "index:before-removals",
                      "index:file-removed@2", "sync:before-finish"]


def test_kill_during_incremental_sync_at_labelled_points(seeded: tuple[Path, Path], tmp_path: Path) -> None:
    ws, store = seeded
    config = _config(store)
    with open_manager(ws, config, use_global_config=False) as m:
        m.sync()
    for round_, point in enumerate(INCREMENTAL_POINTS, 1):
        _mutate(ws, round_)
        before = hash_tree(ws)
        assert _run_child(ws, config, crash_at=point) == CRASH_EXIT_CODE, point
        assert hash_tree(ws) == before, f"{point}: the workspace changed"
        _check_usable(ws, store, config)
        fresh = fresh_index(ws, config, tmp_path / f"fresh-{round_}.sqlite")
        assert index_content(store) == fresh, f"{point}: {diff(index_content(store), fresh)}"


REBUILD_POINTS = ["rebuild:seeded", "index:file-written@3", "index:file-written@40", "rebuild:built",
                  "swap:step@1", "swap:step@2", "swap:copied"]


def test_kill_during_rebuild_leaves_old_or_new_never_half(seeded: tuple[Path, Path], tmp_path: Path) -> None:
    ws, store = seeded
    # Two index identities over the same files: a rebuild replaces "old" with "new" content.
    old_cfg = _config(store, chunking={"tokens": 200, "overlap": 40})
    new_cfg = _config(store, chunking={"tokens": 64, "overlap": 8})
    old = fresh_index(ws, old_cfg, tmp_path / "old.sqlite")
    new = fresh_index(ws, new_cfg, tmp_path / "new.sqlite")
    assert old["chunks"] != new["chunks"]
    outcomes = {}
    for point in REBUILD_POINTS:
        with open_manager(ws, old_cfg, use_global_config=False) as m:
            m.sync()
        assert index_content(store) == old
        before = hash_tree(ws)
        assert _run_child(ws, new_cfg, crash_at=point) == CRASH_EXIT_CODE, point
        assert hash_tree(ws) == before
        assert integrity(store) == "ok"
        state = index_content(store)
        assert state in (old, new), f"{point}: half-swapped index"
        outcomes[point] = "new" if state == new else "old"
        _check_usable(ws, store, new_cfg)
        assert index_content(store) == new
    # The swap commits in one transaction: before it the old index, after it the new one.
    assert outcomes["rebuild:built"] == "old" and outcomes["swap:step@1"] == "old" and outcomes["swap:copied"] == "new"


def test_sigkill_at_random_moments_of_first_index_and_rebuild(seeded: tuple[Path, Path], tmp_path: Path) -> None:
    ws, store = seeded
    config = _config(store)
    fresh = fresh_index(ws, config, tmp_path / "fresh.sqlite")
    started = time.monotonic()
    assert _run_child(ws, config) == 0  # how long a whole first index takes here, process start included
    duration = time.monotonic() - started
    rng = random.Random(5)
    killed = 0
    # At least 8 rounds and 3 real kills: under load a child can finish before its kill time, so
    # keep going (up to 24 rounds) rather than let the machine's speed decide what was tested.
    for i in range(24):
        if i >= 8 and killed >= 3:
            break
        force = i % 2 == 1  # first index into an empty store, or a forced rebuild over a full one
        if not force:
            for path in store.parent.glob(store.name + "*"):
                path.unlink()
        code = _run_child(ws, config, force=force, kill_after=rng.uniform(0.02, 0.8) * duration)
        killed += code == -signal.SIGKILL
        if store.exists():
            assert integrity(store) == "ok"
        _check_usable(ws, store, config)
        assert index_content(store) == fresh, diff(index_content(store), fresh)
    assert killed >= 3, f"only {killed} of {i + 1} children were killed mid-way (timing too short?)"


# --- corrupt database files ----------------------------------------------------------------------


def _garbage(store: Path) -> None:
    store.write_bytes(os.urandom(64 * 1024))


def _truncated(store: Path) -> None:
    data = store.read_bytes()
    store.write_bytes(data[: len(data) // 2])


def _torn_header(store: Path) -> None:
    store.write_bytes(store.read_bytes()[:60])


def _garbage_wal(store: Path) -> None:
    wal = Path(str(store) + "-wal")
    wal.write_bytes(os.urandom(wal.stat().st_size))


def _garbage_wal_frames(store: Path) -> None:
    """Keep the WAL header and its first half; garbage after (a torn write of the last commits)."""
    wal = Path(str(store) + "-wal")
    data = wal.read_bytes()
    keep = len(data) // 2
    wal.write_bytes(data[:keep] + os.urandom(len(data) - keep))


@pytest.mark.parametrize(
    ("damage", "moved_aside"),
    [(_garbage, True), (_truncated, True), (_torn_header, True), (_garbage_wal, False), (_garbage_wal_frames, False)],
    ids=["garbage", "truncated", "torn-header", "garbage-wal", "garbage-wal-frames"],
)
def test_corrupt_database_is_detected_moved_aside_and_rebuilt(
    seeded: tuple[Path, Path], tmp_path: Path, damage: Callable[[Path], None], moved_aside: bool
) -> None:
    ws, store = seeded
    config = _config(store)
    with open_manager(ws, config, use_global_config=False) as m:
        m.sync()
    if not moved_aside:
        # Leave committed transactions in the WAL only: a sync killed before it closed its connections.
        _mutate(ws, 1)
        assert _run_child(ws, config, crash_at="sync:before-finish") == CRASH_EXIT_CODE
        assert Path(str(store) + "-wal").stat().st_size > 4096
    fresh = fresh_index(ws, config, tmp_path / "fresh.sqlite")
    before = hash_tree(ws)
    damage(store)
    with open_manager(ws, config, use_global_config=False) as m:
        recovered = m.status().details["recovered"]
        resp = m.search("staging database", min_score=0)
        assert [r.path for r in resp.results][:1] == ["MEMORY.md"]
        if moved_aside:
            # Detected, moved aside (never deleted), rebuilt from the files, and said so.
            assert recovered and "moved to" in recovered
            assert any("moved to" in w for w in resp.warnings)
            assert list(store.parent.glob(store.name + ".corrupt-*"))
        else:
            # SQLite ignores WAL frames that fail their checksums: the database itself is intact.
            assert recovered is None
        m.sync()  # an explicit sync also indexes transcript appends that searches defer
        assert m.status().clean is True
    assert hash_tree(ws) == before, "the workspace changed"
    assert integrity(store) == "ok"
    assert index_content(store) == fresh, diff(index_content(store), fresh)


def test_two_processes_finding_the_same_damage_recover_once(seeded: tuple[Path, Path], tmp_path: Path) -> None:
    ws, store = seeded
    config = _config(store)
    with open_manager(ws, config, use_global_config=False) as m:
        m.sync()
    _garbage(store)
    ctx = multiprocessing.get_context("fork")
    children = [ctx.Process(target=_child, args=(str(ws), config, False, None)) for _ in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    # Exactly one process moved the damaged file aside; the others found the fresh replacement.
    assert len([p for p in store.parent.glob(store.name + ".corrupt-*") if not p.name.endswith(("-wal", "-shm"))]) == 1
    _check_usable(ws, store, config)
    assert index_content(store) == fresh_index(ws, config, tmp_path / "fresh.sqlite")
