"""QMD's processes kept off the search path: the warm ``qmd mcp`` process (:class:`Supervisor`) and
the re-index a search waits for only so long (:class:`BoundedSync`).

A search never starts QMD on its own thread and never waits ``qmd.startTimeoutMs`` for it. It asks
:meth:`Supervisor.acquire` for the process; when there is none (first use, a failure, a restart for
new collections) and the backoff allows, a start begins on a background thread and the search waits
for it at most the time it was given. Past that the search falls back and the start carries on, for
the next search. A start that fails (no binary, a crash, no answer to the handshake within
``startTimeoutMs``) is a failure like a failed search: recorded in the backoff, so QMD is left alone
until its retry time and no search waits for it meanwhile. At the retry time QMD is started again in
the background, so it is usually warm by the next search once it works again.

The lock guards bookkeeping only: no process is started, waited for or spoken to while it is held,
so a stopped or slow QMD never holds up another thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mdrecall.backends.qmd.health import Backoff
from mdrecall.backends.qmd.process import QmdError, QmdProcess
from mdrecall.freshness.monitor import BUSY_OTHER_THREAD
from mdrecall.types import SyncReport

log = logging.getLogger(__name__)


class Unavailable(QmdError):
    """No process for this request. ``kind``: ``starting`` (a start is under way), ``backoff`` (an
    earlier failure, QMD not retried yet), ``closed``, or the kind of a failure this request found
    (``exited``: found dead) or waited for (the start's own error); those are recorded already."""


class Supervisor:
    """``spawn`` builds the process (QmdError ``spawn`` when there is no binary); ``on_start`` runs on a
    started process before any request gets it (QMD's status), and its QmdError fails the start."""

    def __init__(self, spawn: Callable[[], QmdProcess], start_timeout_s: float, backoff: Backoff,
                 on_start: Callable[[QmdProcess], None]) -> None:  # fmt: skip
        self._spawn = spawn
        self.start_timeout_s = start_timeout_s
        self.backoff = backoff
        self._on_start = on_start
        self._cond = threading.Condition()
        self._proc: QmdProcess | None = None
        self._starting: threading.Thread | None = None
        self._starting_proc: QmdProcess | None = None
        self._start_began = 0.0
        self._start_generation = 0  # starts begun, so a waiter knows whether "its" start ended
        self._restart = False
        self._closed = False
        self._retry: threading.Timer | None = None
        self.starts = 0

    @property
    def process(self) -> QmdProcess | None:
        """The warm process (None before the first start, after a failure, or while it restarts)."""
        return self._proc

    @property
    def starting(self) -> bool:
        return self._starting is not None

    def current(self) -> QmdProcess | None:
        """The live process if no restart is pending; never starts one."""
        with self._cond:
            proc = self._proc
            return proc if proc is not None and proc.alive and not self._restart else None

    # -- starting --------------------------------------------------------------------------------
    def start(self) -> bool:
        """Begin a start in the background when there is no usable process; True while one runs."""
        with self._cond:
            return self._begin_start()

    def _begin_start(self) -> bool:  # caller holds _cond
        if self._starting is not None:
            return True
        proc = self._proc
        if self._closed or (proc is not None and proc.alive and not self._restart) or not self.backoff.ready():
            return False
        self._start_began = time.monotonic()
        self._start_generation += 1
        self._starting = threading.Thread(target=self._run_start, name="mdrecall-qmd-start", daemon=True)
        self._starting.start()
        return True

    def _run_start(self) -> None:
        proc: QmdProcess | None = None
        error: QmdError | None = None
        try:
            proc = self._spawn()
            with self._cond:
                self._starting_proc = proc  # close() kills it mid-start
            proc.start(self.start_timeout_s)
            self._on_start(proc)
        except QmdError as exc:
            error = exc
        except Exception as exc:  # never leave waiters without an answer
            error = QmdError("spawn", f"{type(exc).__name__}: {exc}")
        old: QmdProcess | None = None
        with self._cond:
            closed = self._closed
            self._starting = self._starting_proc = None
            if error is None and not closed:
                old, self._proc = self._proc, proc
                self._restart = False
                self.starts += 1
            elif error is not None and not closed:
                self._record(error, "start")
            self._cond.notify_all()
        if proc is not None and (error is not None or closed):
            proc.kill()
        if old is not None and old is not proc:
            old.close()

    def wait_started(self, timeout_s: float) -> bool:
        """Wait for a start under way to end (True: none runs now)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._starting is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    # -- handing it out --------------------------------------------------------------------------
    def acquire(self, wait_s: float) -> QmdProcess:
        """The live process for one request, waiting at most ``wait_s`` for a start; else :class:`Unavailable`.

        A start is waited for within ``wait_s`` of its beginning, not of each request: while a slow
        start runs on, later requests fall back at once instead of each waiting its share again.

        A process found dead (killed, crashed) is a failure like any other: it is not restarted on
        the spot, so the answer falls back and the backoff decides when QMD runs again.
        """
        deadline = time.monotonic() + wait_s
        dead: QmdProcess | None = None
        waited_for: int | None = None
        try:
            with self._cond:
                while True:
                    if self._closed:
                        raise Unavailable("closed", "the manager is closed")
                    proc = self._proc
                    if proc is not None and not self._restart:
                        if proc.alive:
                            return proc
                        dead, self._proc = proc, None
                        error = QmdError("exited", proc.exit_message())
                        self._record(error, "request")
                        raise Unavailable(error.kind, str(error))
                    if waited_for is not None and self._starting is None and self._start_generation == waited_for \
                            and self.backoff.failures and not self.backoff.ready():
                        # The start this request waited for failed (and is recorded): say how.
                        raise Unavailable(self.backoff.last_kind or "start", self.backoff.last_error or "QMD did not start")
                    if not self.backoff.ready():
                        raise Unavailable("backoff", self.backoff.last_error or "QMD failed")
                    if not self._begin_start():
                        raise Unavailable("closed", "the manager is closed")
                    waited_for = self._start_generation
                    remaining = min(deadline, self._start_began + wait_s) - time.monotonic()
                    if remaining <= 0:
                        began = time.monotonic() - self._start_began
                        raise Unavailable("starting", f"QMD is starting ({began:.1f} s so far, allowed "
                                                      f"{self.start_timeout_s:.0f} s by qmd.startTimeoutMs)")
                    self._cond.wait(remaining)
        finally:
            if dead is not None:
                dead.kill()

    # -- outcomes --------------------------------------------------------------------------------
    def succeed(self) -> None:
        with self._cond:
            self.backoff.succeed()

    def fail(self, proc: QmdProcess | None, exc: QmdError) -> float:
        """A request on ``proc`` (None: the current process, if any) failed: drop it and record the
        failure; seconds until QMD is tried again. A process already dropped by another request's
        failure is not counted twice."""
        with self._cond:
            current = self._proc
            if proc is None or proc is current:
                self._proc = None
                delay = self._record(exc, "request")
            else:
                delay = max(0.0, self.backoff.retry_at - time.time())
        dropped = current if proc is None else proc
        if dropped is not None:
            dropped.kill()
        return delay

    def restart(self) -> None:
        """The running process read an old configuration: the next request starts a new one."""
        with self._cond:
            if self._proc is not None:
                self._restart = True

    def _record(self, exc: QmdError, during: str) -> float:  # caller holds _cond
        delay = self.backoff.fail(exc.kind, str(exc))
        if self._retry is not None:
            self._retry.cancel()
        self._retry = threading.Timer(delay + 0.01, self.start)  # a no-op if the retry time moved
        self._retry.daemon = True
        self._retry.start()
        log.warning("mdrecall: QMD failed (%s%s: %s); the fallback answers, QMD retried in %.1fs",
                    exc.kind, " at start" if during == "start" else "", exc, delay)  # fmt: skip
        return delay

    def close(self) -> None:
        with self._cond:
            self._closed = True
            proc, self._proc = self._proc, None
            starting = self._starting_proc
            retry, self._retry = self._retry, None
            self._cond.notify_all()
        if retry is not None:
            retry.cancel()
        if starting is not None:
            starting.kill()
        if proc is not None:
            proc.close()


@dataclass
class _Job:
    done: threading.Event = field(default_factory=threading.Event)
    report: SyncReport | None = None
    error: BaseException | None = None


class BoundedSync:
    """One sync at a time on its own thread, waited for at most ``wait_s`` by each caller.

    A caller that runs out of time hears "busy" (``BUSY_OTHER_THREAD``, which the freshness monitor
    turns into a stale answer with a warning) while the sync carries on, bounded by its own timeout;
    a caller arriving meanwhile waits for the same sync rather than start another.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._job: _Job | None = None

    def run(self, sync: Callable[[], SyncReport], wait_s: float) -> SyncReport:
        with self._lock:
            job = self._job
            if job is None or job.done.is_set():
                job = self._job = _Job()
                threading.Thread(target=self._work, args=(job, sync), name="mdrecall-qmd-sync", daemon=True).start()
        if not job.done.wait(wait_s):
            return SyncReport(rebuild_reason=BUSY_OTHER_THREAD)
        if job.error is not None:
            raise job.error
        return job.report or SyncReport(rebuild_reason=BUSY_OTHER_THREAD)

    @staticmethod
    def _work(job: _Job, sync: Callable[[], SyncReport]) -> None:
        try:
            job.report = sync()
        except BaseException as exc:  # handed to the caller, if one still waits
            job.error = exc
        finally:
            job.done.set()
