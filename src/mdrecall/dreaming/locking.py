"""A cross-process lock file and atomic file replacement for dreaming's state files.

The lock is an OS advisory lock (``flock`` on POSIX, ``msvcrt.locking`` on Windows) on a sidecar
``.lock`` file: the OS drops it when its holder exits or crashes, so there is no stale-lock recovery to
get wrong. ``flock`` locks belong to an open file description, so two threads of one process that
each take the lock exclude each other as well.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from mdrecall.errors import StoreError

if sys.platform == "win32":  # pragma: no cover - Windows
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:  # POSIX
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class FileLock:
    """``with FileLock(path):`` — exclusive across processes and threads; StoreError on timeout."""

    def __init__(self, path: Path, timeout: float = 10.0, poll: float = 0.04) -> None:
        self.path = path
        self.timeout = timeout
        self.poll = poll
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                os.close(fd)
                raise StoreError(
                    f"{self.path} is locked by another mdrecall process for over {self.timeout:.0f}s; "
                    "try again when it finishes"
                )
            time.sleep(self.poll)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                _unlock(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same directory, fsync, then ``os.replace``: readers see old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = None
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; keep an existing file's mode, give new files the usual 0644.
        os.chmod(tmp, mode if mode is not None else 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
