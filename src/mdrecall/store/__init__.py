"""Where the index lives, who may write it, and how a rebuilt index replaces the old one.

* One writer at a time across processes: an exclusive ``flock`` on ``<db>.lock``. Readers never take
  it; WAL lets them read while a sync writes.
* A rebuild (index identity changed, or ``--force``) is built in a separate database file and then
  copied over the live one with SQLite's online backup API, which commits as one write transaction:
  readers see the old index until the copy commits and the new one after, and a crash at any point
  leaves one of the two intact.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from mdrecall.config import mdrecall_home
from mdrecall.crashpoints import crash_point
from mdrecall.errors import StoreError
from mdrecall.store.db import ChunkRow, FileRow, IndexDB, StoreOptions
from mdrecall.store.sql import scalar

__all__ = [
    "ChunkRow",
    "FileRow",
    "IndexDB",
    "StoreOptions",
    "WriterLock",
    "default_store_path",
    "swap_in",
]


def default_store_path(workspace: Path) -> Path:
    real = os.path.realpath(workspace)
    digest = hashlib.sha256(real.encode("utf-8")).hexdigest()[:12]
    name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in Path(real).name)[:40] or "workspace"
    return mdrecall_home() / "index" / f"{name}-{digest}.sqlite"


class WriterLock:
    """Inter-process exclusive lock guarding writes to one index."""

    def __init__(self, db_path: Path) -> None:
        self.path = Path(str(db_path) + ".lock")
        self._fd: int | None = None

    def acquire(self, timeout: float | None = None) -> bool:
        """Take the lock; wait at most ``timeout`` seconds (None: wait forever). False on timeout."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot create the index's lock file {self.path}: {exc.strerror or exc} (check store.path)") from None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(fd)
                    raise
            if deadline is not None and time.monotonic() >= deadline:
                os.close(fd)
                return False
            time.sleep(0.02)

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    @contextmanager
    def hold(self, timeout: float | None = None) -> Iterator[bool]:
        got = self.acquire(timeout)
        try:
            yield got
        finally:
            if got:
                self.release()


def rebuild_path(db_path: Path) -> Path:
    return db_path.with_name(f"{db_path.name}.rebuild-{os.getpid()}-{time.time_ns()}")


def remove_db_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(str(path) + suffix)
        except FileNotFoundError:
            pass


def cleanup_stale_rebuilds(db_path: Path) -> None:
    """Remove rebuild databases left by crashed processes (only call while holding the writer lock:
    rebuilds only run under it, so any rebuild file seen then belongs to a dead process)."""
    for leftover in db_path.parent.glob(db_path.name + ".rebuild-*"):
        base = leftover.name
        for suffix in ("-wal", "-shm", "-journal"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]  # also catches a -wal whose database was already removed
        remove_db_files(leftover.with_name(base))


SWAP_STEP_PAGES = 64


def _match_page_size(built: IndexDB, dest: apsw.Connection) -> None:
    """The backup API cannot copy into a WAL database of another page size, and a WAL database's
    page size is fixed: an index created with 4 KiB pages (schema 2) keeps them, so the rebuilt
    copy is re-paged to match first (a VACUUM of the private copy, nobody else has it open)."""
    live_size = int(scalar(dest, "PRAGMA page_size"))
    has_pages = int(scalar(dest, "PRAGMA page_count")) > 0
    conn = built.conn
    if not has_pages or int(scalar(conn, "PRAGMA page_size")) == live_size:
        return
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute(f"PRAGMA page_size={live_size}")
    conn.execute("VACUUM")
    conn.execute("PRAGMA journal_mode=WAL")


def swap_in(built: IndexDB, live_path: Path, busy_timeout_ms: int) -> None:
    """Replace the live database's content with ``built``'s in one transaction."""
    built.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    dest = apsw.Connection(str(live_path))
    try:
        dest.setbusytimeout(busy_timeout_ms)
        _match_page_size(built, dest)
        with dest.backup("main", built.conn, "main") as backup:
            # Steps of SWAP_STEP_PAGES inside the one destination write transaction: a crash between
            # steps (the crash tests stop here) leaves uncommitted WAL frames that SQLite ignores.
            while not backup.done:
                backup.step(SWAP_STEP_PAGES)
                crash_point("swap:step")
        crash_point("swap:copied")
    finally:
        dest.close()
