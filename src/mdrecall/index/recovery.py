"""The live index as searches read it: opened with a cheap check, rebuilt from the files when damaged.

Opening runs a structural probe (the first and last row of each table, milliseconds); the full
``PRAGMA quick_check`` (it reads the whole file: about a second at 10k chunks with vectors) runs on a
background thread once the index has been open a second (``VERIFY_AFTER_S``), and its verdict is
reported in ``status()``. Damage found either way, or raised by
SQLite while the index is in use, moves the index files aside (never anything under the workspace)
and starts a fresh index, which the next sync fills from the Markdown. A full disk or an I/O error
is not damage (:mod:`mdrecall.store.errors`): it is reported in one line and nothing is moved aside.

Every read of the connection goes through :meth:`IndexHandle.reading`, under one lock: recovery
closes and replaces the connection under the same lock, so a search or ``status()`` never touches a
connection that is being closed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import apsw

from mdrecall.errors import StoreError
from mdrecall.store import WriterLock
from mdrecall.store.db import IndexDB, StoreOptions
from mdrecall.store.errors import write_failure

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What SQLite raises on a damaged database file.
CORRUPTION_ERRORS = (apsw.CorruptError, apsw.NotADBError)


#: How long an index is open before its full check starts. A check a process closes before it ends
#: tells nobody anything: a one-shot command (``mdrecall search`` without a daemon, ~0.3 s) would
#: start it after its search and interrupt it at close, ~4 % more CPU for nothing. Long-lived processes
#: (the MCP server, ``mdrecall watch``, an application) have their verdict a second later.
VERIFY_AFTER_S = 1.0

#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def foreign_reason(path: Path) -> str | None:
    """Why what is at ``path`` is not an index mdrecall may move aside as damaged: a folder, a special
    file, or a file that is neither an SQLite database nor an index mdrecall has written (which has
    its ``<path>.lock`` beside it). None: nothing there, an empty file, or an index. Asked before
    this process takes the lock (which creates that file): ``store.path`` set to a folder or to
    someone's notes must be refused, never renamed."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(st.st_mode):
        return f"is a folder (name a file in it, e.g. {Path(path) / 'index.sqlite'})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size == 0 or Path(str(path) + ".lock").exists():
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None if head == SQLITE_HEADER else "is not an mdrecall index (not an SQLite database)"


def is_corruption(exc: BaseException) -> bool:
    """A damaged index file, raised directly or wrapped in a StoreError when opening it."""
    return isinstance(exc, CORRUPTION_ERRORS) or isinstance(exc.__cause__, CORRUPTION_ERRORS)


class IndexHandle:
    """The read connection of one index, its recovery and its background integrity check."""

    def __init__(
        self,
        db_path: Path,
        options: StoreOptions,
        lock: WriterLock,
        *,
        on_recovered: Callable[[], None] | None = None,
    ) -> None:
        self.db_path = db_path
        self.options = options
        self._lock = lock
        # Before anything is opened or locked (the lock creates <path>.lock): what is there and not
        # ours is refused, never moved aside as a damaged index.
        foreign = foreign_reason(db_path)
        if foreign is not None:
            raise StoreError(f"store.path {db_path} {foreign}; mdrecall does not move or overwrite it: point store.path "
                             "at a new file")  # fmt: skip
        self._on_recovered = on_recovered
        self._mutex = threading.Lock()
        #: "pending" until the background check ran, then "ok", "failed: ...", "interrupted", "not checked: ...".
        self.integrity = "pending"
        #: What the last recovery did, for status and the next search's warnings.
        self.recovered: str | None = None
        #: Counts the index files replaced while in use: a search that read a different one than it
        #: checked for freshness says its answer may be incomplete.
        self.replacements = 0
        self._recovery_reported = False
        self._verify_conn: apsw.Connection | None = None
        self._verify_thread: threading.Thread | None = None
        self._check_lock = threading.Lock()  # one full check at a time (check_now beside the background one)
        self._check_thread: threading.Thread | None = None
        self._closed = False
        self._closing = threading.Event()  # set first thing by close(): a held check does not start
        self._db = self._open()

    # -- reading ----------------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[IndexDB]:
        """The connection, held for the duration of the ``with`` block."""
        with self._mutex:
            if self._closed:
                raise StoreError("the index is closed")
            yield self._db

    def recovering(self, call: Callable[[], T], *, lock_held: bool = False) -> T:
        """``call()``, and once more after recovering the index if SQLite reports it damaged."""
        try:
            return call()
        except (StoreError, *CORRUPTION_ERRORS) as exc:
            if not is_corruption(exc):
                raise
            self.recover_in_use(exc, lock_held=lock_held)
            return call()

    def take_recovery_note(self) -> str | None:
        """The recovery message, once: the first search after a recovery says what happened."""
        if self.recovered and not self._recovery_reported:
            self._recovery_reported = True
            return self.recovered
        return None

    # -- opening and recovery ---------------------------------------------------------------------
    def _try_open(self, full: bool = False) -> tuple[IndexDB | None, str | None]:
        """Open and check: the cheap probe, or ``full`` (``PRAGMA quick_check``) once damage was seen."""
        try:
            db = IndexDB(self.db_path, self.options)
        except StoreError as exc:
            clear = write_failure(exc, self.db_path, opening=True)
            if clear is not None:
                raise clear from exc  # a full disk is not damage: never move a good index aside for it
            return None, str(exc)
        if db.integrity_ok() if full else db.probe_ok():
            return db, None
        db.close()
        return None, "integrity check failed" if full else "structural probe failed"

    def _open(self, *, cause: str | None = None, lock_held: bool = False) -> IndexDB:
        """Open the live index; a corrupt file is moved aside and a fresh one started.

        Files are moved under the writer lock and after a second check, so two processes finding the
        same damage do not move each other's fresh replacement aside. ``cause``: corruption already
        seen while the index was in use (skip the first check).
        """
        reason = cause
        if cause is None:
            db, reason = self._try_open()
            if db is not None:
                return db
        got = lock_held or self._lock.acquire(self.options.busy_timeout_ms / 1000.0)
        try:
            db, again = self._try_open(full=cause is not None)
            if db is not None:
                return db  # another process recovered it while we waited (or the error did not last)
            aside = self.db_path.with_name(f"{self.db_path.name}.corrupt-{time.time_ns()}")
            for suffix in ("", "-wal", "-shm"):
                src = Path(str(self.db_path) + suffix)
                if src.exists():
                    os.replace(src, Path(str(aside) + suffix))
            fresh = IndexDB(self.db_path, self.options)
            if cause is not None:
                self.replacements += 1
                if self._on_recovered is not None:
                    # Before status or a search can see the note below: whoever waits for it must find
                    # the monitor already comparing everything again, never an empty index taken as fresh.
                    self._on_recovered()
            self.recovered = (
                f"index at {self.db_path} was unreadable ({again or reason}); moved to {aside} and rebuilt from the files"
            )
            self._recovery_reported = False
            log.warning("mdrecall: %s", self.recovered)
            return fresh
        finally:
            if got and not lock_held:
                self._lock.release()

    def recover_in_use(self, exc: BaseException, *, lock_held: bool) -> None:
        """SQLite reported corruption while the index was in use: reopen after a full check, or move
        it aside and start over from the files."""
        got = lock_held or self._lock.acquire(self.options.busy_timeout_ms / 1000.0)
        if not got:
            # Another writer holds the index: never move a file aside under it. It (or the next
            # search) meets the same damage and recovers.
            raise exc
        try:
            with self._mutex:
                self._db.close()
                self._db = self._open(cause=f"{type(exc).__name__}: {exc}", lock_held=True)
                if self._on_recovered is not None:
                    self._on_recovered()  # also where another process replaced the file while we waited
        finally:
            if not lock_held:
                self._lock.release()

    # -- the background full check ----------------------------------------------------------------
    def start_verify(self, hold: threading.Event | None = None, hold_s: float = 0.0) -> None:
        """Start the full check on its own thread. ``hold``: wait until it is set, at most ``hold_s``
        seconds, first: the check reads the whole file (~0.7 s of CPU at 100k chunks), and a
        process's first search, which has the files to check too, would share the cores with it."""
        if self._verify_thread is None:
            self._verify_thread = threading.Thread(target=self._verify, args=(hold, hold_s), name="mdrecall-verify-index",
                                                   daemon=True)  # fmt: skip
            self._verify_thread.start()

    def _verify(self, hold: threading.Event | None = None, hold_s: float = 0.0) -> None:
        if self._closing.wait(VERIFY_AFTER_S):
            return  # a one-shot command (a CLI search) closes first: the check would only cost it CPU
        if hold is not None:
            deadline = time.monotonic() + hold_s
            while not hold.is_set() and not self._closing.is_set() and time.monotonic() < deadline:
                hold.wait(min(0.1, max(0.0, deadline - time.monotonic())))
        if self._closing.is_set():
            return  # closed while held: the check would only delay close()
        self._checked(only_if_pending=True)

    def check_now(self, *, only_if_pending: bool = False) -> str:
        """Run the full check now and return its verdict (``mdrecall doctor``, which closes before the
        background check would start); damage found is recovered from as there. ``only_if_pending``:
        not when a verdict is in already. The check runs on a thread of its own, waited for: SQLite
        holds the thread that runs it until the whole file is read (seconds for a large index), and
        a Ctrl-C meanwhile must stop the command at once (closing the index interrupts the check)."""
        worker = threading.Thread(target=self._checked, kwargs={"only_if_pending": only_if_pending},
                                  name="mdrecall-check-index", daemon=True)  # fmt: skip
        self._check_thread = worker
        worker.start()
        worker.join()
        return self.integrity

    def _checked(self, *, only_if_pending: bool) -> None:
        with self._check_lock:  # one full check at a time
            if not (only_if_pending and self.integrity != "pending"):
                self._check()

    def _check(self) -> None:
        try:
            # Read-write (it only reads): a read-only connection cannot replay the WAL a killed
            # writer left behind and would fail with ReadOnlyError on a healthy index.
            conn = apsw.Connection(str(self.db_path), flags=apsw.SQLITE_OPEN_READWRITE)
            conn.setbusytimeout(self.options.busy_timeout_ms)
        except apsw.Error as exc:
            self.integrity = f"not checked: {exc}"
            return
        self._verify_conn = conn
        try:
            if self._closing.is_set():  # close() may have looked for the connection before it was set
                return
            row = conn.execute("PRAGMA quick_check").fetchone()
            result = str(row[0]) if row else "no answer"
        except apsw.InterruptError:
            self.integrity = "interrupted"
            return
        except CORRUPTION_ERRORS as exc:
            result = f"{type(exc).__name__}: {exc}"
        except apsw.Error as exc:  # busy, I/O: not a verdict on the file
            self.integrity = f"not checked: {type(exc).__name__}: {exc}"
            return
        finally:
            self._verify_conn = None
            conn.close()
        self.integrity = "ok" if result == "ok" else f"failed: {result}"
        if result != "ok" and not self._closed:
            try:
                self.recover_in_use(StoreError(f"integrity check failed: {result}"), lock_held=False)
            except Exception as exc:
                log.warning("mdrecall: could not recover the index after a failed integrity check: %s", exc)

    def close(self) -> None:
        self._closing.set()
        verifying = self._verify_conn
        if verifying is not None:
            verifying.interrupt()  # a full check of a large index must not hold up close()
        for thread in (self._verify_thread, self._check_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(5.0)
        with self._mutex:
            self._closed = True
            self._db.close()
