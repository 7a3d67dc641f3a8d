"""A full disk while indexing: one clear line, the old index keeps answering, nothing moved aside.

Two ways to run out of room, both real: a small tmpfs that is filled to the last byte (needs root
and permission to mount; skipped otherwise), and ``RLIMIT_FSIZE`` (a file size limit: the kernel
refuses to grow any file past it with EFBIG), which works for any user.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexcheck import index_content
from mdrecall import open_manager
from mdrecall.errors import StoreError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="tmpfs and RLIMIT_FSIZE behaviour is Linux's")

BIG = "- " + "kestrel fact with lots of words in it " * 40 + "\n"


def _notes(ws: Path, start: int, end: int, big: bool = False) -> None:
    for i in range(start, end):
        body = BIG if big else f"- The kestrel fact number {i} is here.\n"
        (ws / "memory" / f"n{i}.md").write_text(f"# Note {i}\n{body}", encoding="utf-8")


def _config(db: Path) -> dict[str, Any]:
    return {"provider": "none", "store": {"path": str(db)}, "sync": {"watch": False}}


def _cli(args: list[str], home: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MDRECALL_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "mdrecall", *args], capture_output=True, text=True, env=env,
                          timeout=120, **kwargs)


def _one_clear_line(stderr: str) -> str:
    # Progress lines (printed every 2 s off a terminal, so on a slow machine) are not the message.
    progress = ("Scanning", "Indexing memory files…", "Embedding chunks…")
    lines = [line for line in stderr.strip().split("\n") if line and not line.startswith(progress)]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("mdrecall: cannot write the index at "), lines[0]
    return lines[0]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> Path:
    """Write a file until the filesystem refuses another byte."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_full_tmpfs_during_an_incremental_sync(tmp_path: Path, tmpfs: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    _notes(ws, 0, 30)
    db = tmpfs / "index.sqlite"
    home = tmp_path / "home"
    common = ["-w", str(ws), "-c", "provider=none", "-c", f"store.path={db}"]
    assert _cli(["index", *common], home).returncode == 0

    with open_manager(ws, _config(db)) as m:  # a long-lived process (an MCP server) holds the index
        assert [r.path for r in m.search("kestrel fact number 3", min_score=0).results][:1] == ["memory/n3.md"]
        filler = _fill(tmpfs)
        _notes(ws, 30, 300, big=True)
        with pytest.raises(StoreError) as info:
            m.sync()
        message = str(info.value)
        assert "\n" not in message and "the disk is full" in message and "still answers searches" in message
        # The old index keeps answering, and says it is behind.
        response = m.search("kestrel fact number 3", min_score=0)
        assert [r.path for r in response.results][:1] == ["memory/n3.md"] and response.stale
        assert any("disk is full" in w for w in response.warnings)
        # The CLI says the same in one line, without a traceback.
        assert "the disk is full" in _one_clear_line(_cli(["index", *common], home).stderr)
        assert not list(tmpfs.glob("*.corrupt-*"))  # a full disk is not damage: nothing moved aside
        filler.unlink()
        assert m.sync().files_indexed > 0  # room again: the next sync completes the work
    fresh = tmp_path / "fresh.sqlite"
    with open_manager(ws, _config(fresh)) as m:
        m.sync()
    assert index_content(db) == index_content(fresh)


def test_a_completely_full_disk_never_moves_the_index_aside(tmp_path: Path, tmpfs: Path) -> None:
    """With no room left even for SQLite's -wal/-shm files, opening fails: one line, nothing moved."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    _notes(ws, 0, 30)
    db = tmpfs / "index.sqlite"
    home = tmp_path / "home"
    common = ["-w", str(ws), "-c", "provider=none", "-c", f"store.path={db}"]
    assert _cli(["index", *common], home).returncode == 0
    before = db.read_bytes()
    filler = _fill(tmpfs)
    _notes(ws, 30, 60)
    for command in (["index"], ["search", "kestrel"]):
        done = _cli([*command, *common], home)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "the disk is full" in done.stderr and len(done.stderr.strip().split("\n")) <= 2
    assert not list(tmpfs.glob("*.corrupt-*")) and db.read_bytes() == before
    filler.unlink()
    assert _cli(["search", "kestrel fact number 3", *common], home).returncode == 0


_LIMITED = """
import json, os, resource, signal, sys
sys.path.insert(0, sys.argv[3])
from test_disk_full import _notes
from pathlib import Path
from mdrecall import open_manager
from mdrecall.errors import StoreError
ws, db = sys.argv[1], sys.argv[2]
config = {"provider": "none", "store": {"path": db}, "sync": {"watch": False}}
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
with open_manager(ws, config) as m:
    assert m.search("kestrel fact number 3", min_score=0).results
    sizes = [os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s)]
    resource.setrlimit(resource.RLIMIT_FSIZE, (max(sizes) + 16384, resource.RLIM_INFINITY))
    _notes(Path(ws), 30, 300, big=True)  # small files: each stays below the limit
    try:
        m.sync()
        error = None
    except StoreError as exc:
        error = str(exc)
    response = m.search("kestrel fact number 3", min_score=0)
    print(json.dumps({"error": error, "paths": [r.path for r in response.results], "stale": response.stale}))
"""


def test_file_size_limit_during_an_incremental_sync(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    _notes(ws, 0, 30)
    db = tmp_path / "index.sqlite"
    with open_manager(ws, _config(db)) as m:
        m.sync()
    tests = str(Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-c", _LIMITED, str(ws), str(db), tests], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["error"] is not None and "\n" not in result["error"], result
    assert result["error"].startswith(f"cannot write the index at {db}: disk I/O error. The index still answers")
    assert result["paths"][:1] == ["memory/n3.md"] and result["stale"] is True

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        size = max(os.path.getsize(f"{db}{s}") for s in ("", "-wal") if os.path.exists(f"{db}{s}"))
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 16384, resource.RLIM_INFINITY))

    cli = _cli(["index", "-w", str(ws), "-c", "provider=none", "-c", f"store.path={db}"], tmp_path / "home", preexec_fn=limit)
    assert cli.returncode == 1
    _one_clear_line(cli.stderr)
    assert not list(tmp_path.glob("index.sqlite.corrupt-*"))
    with open_manager(ws, _config(db)) as m:  # no limit any more: the next sync completes the work
        m.sync()
    fresh = tmp_path / "fresh.sqlite"
    with open_manager(ws, _config(fresh)) as m:
        m.sync()
    assert index_content(db) == index_content(fresh)


def test_a_full_disk_while_merging_the_keyword_index_costs_only_the_merge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge (store/db.py, compact_keyword_index) runs in a transaction of its own after the
    sync's: it needs room for a second copy of the keyword index, and running out of it must not
    fail the sync that was written. Other errors still reach the caller."""
    import apsw

    from mdrecall.store.db import IndexDB

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    _notes(ws, 0, 5)
    db = tmp_path / "index.sqlite"
    attempts: list[bool] = []

    def no_room(self: IndexDB, *, built: bool, small_only: bool = False) -> bool:
        attempts.append(built)
        self.conn.execute("CREATE TABLE IF NOT EXISTS merge_scratch(x)")  # a write the failure rolls back
        raise apsw.FullError("database or disk is full")

    with monkeypatch.context() as patch:
        patch.setattr(IndexDB, "compact_keyword_index", no_room)
        with open_manager(ws, _config(db)) as m:
            first = m.sync()
            _notes(ws, 5, 8)
            second = m.sync()
            assert first.files_indexed == 5 and second.files_indexed == 3 and attempts == [True, False]
            assert [r.path for r in m.search("kestrel fact number 6", min_score=0).results][:1] == ["memory/n6.md"]
            assert m.search("kestrel fact number 7", min_score=0).stale is False
    check = IndexDB(db, _store_options())
    try:
        assert check.conn.execute("SELECT name FROM sqlite_master WHERE name = 'merge_scratch'").fetchone() is None
    finally:
        check.close()

    def broken(self: IndexDB, *, built: bool, small_only: bool = False) -> bool:
        raise apsw.CorruptError("database disk image is malformed")

    from mdrecall.index.syncing import _compact

    monkeypatch.setattr(IndexDB, "compact_keyword_index", broken)
    check = IndexDB(db, _store_options())
    try:
        with pytest.raises(apsw.CorruptError):  # damage goes on to the manager's recovery
            _compact(check, built=True)
    finally:
        check.close()


def _store_options() -> Any:
    from mdrecall.store.db import StoreOptions

    return StoreOptions()
