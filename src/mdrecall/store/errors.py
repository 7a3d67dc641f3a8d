"""Write failures of the index that are not damage: a full disk, a file size limit, an I/O error.

They leave a working index (SQLite rolls the failed transaction back; each file's rows are replaced
in one transaction, so nothing half-written is visible: files indexed before the failure are new,
the rest old) and it keeps answering searches.
What a person needs is one line saying so and what to do, not a traceback, and never the recovery
path for corrupt files: a full disk must not get a good index moved aside.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from mdrecall.errors import StoreError

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _disk_has_no_room(path: Path) -> bool:
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024 or st.f_favail == 0


def write_failure(exc: BaseException, path: Path, *, opening: bool = False) -> StoreError | None:
    """A clear StoreError for a failed index write that is not corruption, or None.

    ``opening``: the index could not even be opened (SQLite needs room for its ``-wal``/``-shm``
    files), so it cannot answer either; otherwise the old index still does.
    """
    full = False
    cause: BaseException | None = exc
    while cause is not None:  # a StoreError from IndexDB wraps the apsw error
        if isinstance(cause, apsw.FullError) or (isinstance(cause, OSError) and cause.errno in _FULL_ERRNOS):
            full = True
            break
        if isinstance(cause, apsw.IOError):
            full = _disk_has_no_room(path)
            break
        cause = cause.__cause__
    if cause is None:
        return None
    problem = "the disk is full" if full else "disk I/O error"
    advice = "free some space" if full else "check free space, file size limits and permissions"
    if opening:
        return StoreError(f"cannot open the index at {path}: {problem} (SQLite needs room for its -wal and -shm "
                          f"files). Nothing was changed; {advice}, then try again")
    return StoreError(f"cannot write the index at {path}: {problem}. The index still answers searches (without "
                      f"the changes not yet indexed); {advice}, then run `mdrecall index`")


@contextmanager
def clear_write_errors(path: Path) -> Iterator[None]:
    """Turn a full disk or an I/O error while writing the index into one clear StoreError."""
    try:
        yield
    except (apsw.Error, OSError, StoreError) as exc:
        clear = write_failure(exc, path)
        if clear is None:
            raise
        raise clear from exc


__all__ = ["clear_write_errors", "write_failure"]
