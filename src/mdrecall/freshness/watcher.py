"""The file watcher: reports changed memory files after a quiet period.

The watcher is an optimisation, not the source of truth: the freshness monitor's reconciliation (a
walk with mtime+size) catches anything missed here. So the rules are "never die, never block, err
towards reporting": a directory event is always reported (files created in a brand-new subdirectory
may race the kernel watch being attached, and the directory event makes the next sync walk it),
errors in the callback are logged and the watcher keeps going, and a failing native watch falls back
to polling. What is watched: :mod:`mdrecall.freshness.roots`.

Changes are debounced: the callback fires once ``sync.watchDebounceMs`` (1500 ms) passes without new
events, or at the latest after ``_MAX_WAIT_FACTOR`` times that while events keep arriving. Transcript
appends go through :class:`SessionDeltaTracker`, so a chatty session re-indexes every
``deltaBytes``/``deltaMessages`` rather than on every line.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.freshness.deltas import SessionDeltaTracker
from mdrecall.freshness.roots import RootFilter, WatchPlan, plan_watch, watch_roots
from mdrecall.sources.transcripts import list_transcripts

log = logging.getLogger(__name__)

ChangeCallback = Callable[[list[Path]], None]

_MAX_WAIT_FACTOR = 5
#: Each watcher's own number: what a token of one watcher's (:meth:`MemoryWatcher.seen`) is told apart by.
_SERIALS = itertools.count(1)


class _Flag:
    """A stop signal watchfiles polls: set by stop() or by a restart request."""

    def __init__(self, *events: threading.Event):
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


@dataclass
class WatcherStats:
    started_at: float | None = None
    last_event_at: float | None = None
    last_callback_at: float | None = None
    events: int = 0
    callbacks: int = 0
    restarts: int = 0
    errors: int = 0
    last_error: str | None = None
    polling: bool = False
    roots: list[str] = field(default_factory=list)


class MemoryWatcher:
    """Watches the indexed roots in daemon threads and calls ``on_change(paths)`` after a quiet period.

    ``paths`` are absolute :class:`Path` objects (files or directories; deleted ones included).
    ``on_change`` runs on the watcher's dispatch thread, never concurrently with itself.
    """

    def __init__(
        self,
        workspace: Path | str,
        config: MemoryConfig,
        on_change: ChangeCallback,
        *,
        debounce_ms: int | None = None,
        session_tracker: SessionDeltaTracker | None = None,
        force_polling: bool | None = None,
        on_attached: Callable[[], None] | None = None,
        hold: threading.Event | None = None,
        hold_s: float = 0.0,
    ):
        self.workspace = Path(workspace).expanduser().absolute()
        self.config = config
        self.on_change = on_change
        self.debounce_s = (config.sync.watchDebounceMs if debounce_ms is None else debounce_ms) / 1000
        self.sessions = session_tracker if session_tracker is not None else SessionDeltaTracker.from_config(config)
        self.force_polling = force_polling
        self.stats = WatcherStats()
        self._roots = watch_roots(self.workspace, config)
        self._filter = RootFilter(self._roots)
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._pending: set[Path] = set()
        self.serial = next(_SERIALS)
        #: Changed paths inside the watched roots seen so far, a transcript append below the
        #: thresholds included (:meth:`seen`).
        self._seen = 0
        self._first_pending_at: float | None = None
        self._last_pending_at: float | None = None
        self._threads: list[threading.Thread] = []
        self._ready = threading.Event()
        self.on_attached = on_attached
        #: Set when the first attach may begin; waited for at most ``hold_s`` seconds (None: at once).
        self.hold, self.hold_s = hold, hold_s
        #: ``time.monotonic()`` when every OS watch of the current plan was attached; None while
        #: attaching (after start or a restart): changes before it may have gone unseen.
        self.attached_at: float | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return bool(self._threads) and any(t.is_alive() for t in self._threads) and not self._stop.is_set()

    def start(self, wait_ready: float = 5.0) -> MemoryWatcher:
        """Start the watch and dispatch threads; waits up to ``wait_ready`` seconds until the first
        watch is attached (0: return at once; :attr:`attached_at` says when it is)."""
        if self._threads:
            return self
        try:
            import watchfiles  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the environment
            from mdrecall.extras import package_hint

            raise ImportError(f"file watching needs watchfiles: {package_hint('watchfiles')}") from exc
        self._stop.clear()
        self.stats.started_at = time.time()
        supervisor = threading.Thread(target=self._supervise, name="mdrecall-watch", daemon=True)
        dispatcher = threading.Thread(target=self._dispatch, name="mdrecall-watch-dispatch", daemon=True)
        self._threads = [supervisor, dispatcher]
        supervisor.start()
        dispatcher.start()
        self._ready.wait(wait_ready)
        return self

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the first watch is attached (or failed); True when it has."""
        return self._ready.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._threads = []

    def __enter__(self) -> MemoryWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def seen(self) -> tuple[int, float | None, int]:
        """A token that changes whenever a path inside the watched roots changes (any event the
        filter keeps, before the transcript thresholds) and whenever the watches are attached again:
        two equal tokens mean that no change was seen between them."""
        with self._lock:
            return self.serial, self.attached_at, self._seen

    def has_pending(self) -> bool:
        """Events received but not yet handed to ``on_change`` (still inside the debounce window)."""
        with self._lock:
            return bool(self._pending)

    def pending_paths(self) -> list[Path]:
        """The paths of the events not yet handed to ``on_change`` (a copy)."""
        with self._lock:
            return list(self._pending)

    def covered(self, since: float) -> None:
        """A sync that began at ``since`` (``time.monotonic()``) saw every change whose event arrived
        before then (the change is on disk before its event): those need no callback of their own.
        Events that arrived later keep the whole batch pending."""
        with self._lock:
            if self._pending and self._last_pending_at is not None and self._last_pending_at < since:
                self._pending.clear()
                self._first_pending_at = self._last_pending_at = None

    def status(self) -> dict[str, Any]:
        with self._lock:
            pending = len(self._pending)
        s = self.stats
        return {
            "running": self.running,
            "roots": list(s.roots),
            "polling": s.polling,
            "pending": pending,
            "events": s.events,
            "callbacks": s.callbacks,
            "restarts": s.restarts,
            "errors": s.errors,
            "lastError": s.last_error,
            "lastEventAt": s.last_event_at,
            "lastCallbackAt": s.last_callback_at,
            "debounceMs": int(self.debounce_s * 1000),
        }

    # -- event intake -------------------------------------------------------------------------

    def notify(self, paths: Iterable[Path | str]) -> None:
        """Feed raw changed paths (from the OS watch, or from an in-process transcript writer)."""
        accepted: list[Path] = []
        seen = 0
        for raw in paths:
            path = Path(raw)
            if not self._filter.accepts(path):
                continue
            seen += 1
            root = self._filter.root_for(path)
            if root is not None and root.kind == "sessions" and path.suffix == ".jsonl":
                if not self.sessions.observe(path):
                    continue
            accepted.append(path)
        if seen:
            with self._lock:
                self._seen += seen
        if not accepted:
            return
        now = time.monotonic()
        with self._lock:
            self._pending.update(accepted)
            self._last_pending_at = now
            if self._first_pending_at is None:
                self._first_pending_at = now
            self.stats.events += len(accepted)
            self.stats.last_event_at = time.time()
        self._wake.set()

    # -- threads ------------------------------------------------------------------------------

    def _supervise(self) -> None:
        if self.hold is not None:  # FreshnessMonitor: a large tree waits for the first search to end
            deadline = time.monotonic() + self.hold_s
            while not self.hold.is_set() and not self._stop.is_set() and time.monotonic() < deadline:
                self.hold.wait(min(0.1, max(0.0, deadline - time.monotonic())))
        if "sessions" in self.config.sources:  # here, not in start(): listing transcripts can take a while
            self.sessions.prime(p for _, p in list_transcripts(self.workspace, self.config.sessions.dir))
        failures = 0
        while not self._stop.is_set():
            self.attached_at = None
            plan = plan_watch(self._roots)
            self.stats.roots = [str(p) for p in plan.recursive] + [f"{p} (shallow)" for p in plan.shallow]
            self._restart.clear()
            polling = bool(self.force_polling) or failures >= 2
            self.stats.polling = polling
            errors: list[BaseException] = []
            workers: list[threading.Thread] = []
            attached: list[threading.Event] = []
            for paths, recursive in ((plan.recursive, True), (plan.shallow, False)):
                if not paths:
                    continue
                ready = threading.Event()
                attached.append(ready)
                workers.append(
                    threading.Thread(
                        target=self._watch_loop,
                        args=(paths, recursive, plan, polling, errors, ready),
                        name=f"mdrecall-watch-{'tree' if recursive else 'dir'}",
                        daemon=True,
                    )
                )
            for worker in workers:
                worker.start()
            for ready in attached:  # a large tree takes seconds to attach; nobody waits for it
                while not ready.wait(0.5) and not self._stop.is_set():
                    pass
            if workers and all(r.is_set() for r in attached) and all(w.is_alive() for w in workers):
                self.attached_at = time.monotonic()
                if self.on_attached is not None:
                    try:
                        self.on_attached()
                    except Exception:
                        log.exception("mdrecall: watcher attach callback failed")
            self._ready.set()
            while not self._stop.is_set() and not self._restart.is_set():
                if workers and not any(w.is_alive() for w in workers):
                    break
                # Nothing to watch at all (no roots exist, no ancestor either): re-plan now and then.
                self._restart.wait(0.2 if workers else 1.0)
                if not workers:
                    break
            self._restart.set()  # stop the sibling loop too
            for worker in workers:
                worker.join(5.0)
            if self._stop.is_set():
                break
            if errors:
                failures += 1
                self.stats.errors += len(errors)
                self.stats.last_error = repr(errors[-1])
                log.warning(
                    "mdrecall watcher error (%s), restarting%s", errors[-1], " with polling" if failures >= 2 else ""
                )
                self._stop.wait(min(5.0, 0.5 * failures))
            if workers:
                self.stats.restarts += 1
                # Anything created while no watch was attached is found by the reconciliation walk the
                # next sync runs; reporting the roots makes sure that sync happens.
                self.notify([r.path for r in self._roots if not r.is_file and r.path.exists()])

    def _needs_replan(self, changed: list[Path], plan: WatchPlan) -> bool:
        """A root appeared or vanished, or a directory on the way to a missing root was created."""
        for path in changed:
            if path in plan.missing:
                return True
            if path in plan.recursive and not path.exists():
                return True
            if any(m.is_relative_to(path) for m in plan.missing) and path.is_dir():
                return True
        return False

    def _watch_loop(
        self,
        paths: list[Path],
        recursive: bool,
        plan: WatchPlan,
        polling: bool,
        errors: list[BaseException],
        ready: threading.Event,
    ) -> None:
        # RustNotify directly (what watchfiles.watch wraps) so "ready" means the OS watch is attached.
        from watchfiles._rust_notify import RustNotify

        stop = _Flag(self._stop, self._restart)
        try:
            with RustNotify([str(p) for p in paths], False, polling, 300, recursive, True) as notifier:
                ready.set()
                while not stop.is_set():
                    raw = notifier.watch(400, 50, 1000, stop)
                    if raw == "stop":
                        return
                    if not isinstance(raw, set):  # "timeout" or "signal"
                        continue
                    changed = [Path(p) for _, p in raw]
                    self.notify(changed)
                    if self._needs_replan(changed, plan):
                        self._restart.set()
                        return
        except Exception as exc:  # never let a watch error kill freshness silently
            errors.append(exc)
        finally:
            ready.set()

    def _dispatch(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.25)
            self._wake.clear()
            while not self._stop.is_set():
                batch, delay = self._take_batch()
                if batch:
                    self._fire(batch)
                elif delay > 0:
                    self._stop.wait(delay)
                else:
                    break

    def _take_batch(self) -> tuple[list[Path], float]:
        """(paths to report now, or [] and how long to wait; ([], 0) when nothing is pending)."""
        with self._lock:
            if not self._pending or self._last_pending_at is None or self._first_pending_at is None:
                return [], 0.0
            now = time.monotonic()
            quiet_left = self.debounce_s - (now - self._last_pending_at)
            cap_left = self.debounce_s * _MAX_WAIT_FACTOR - (now - self._first_pending_at)
            if quiet_left > 0 and cap_left > 0:
                return [], min(quiet_left, cap_left)
            batch = sorted(self._pending)
            self._pending.clear()
            self._first_pending_at = self._last_pending_at = None
            return batch, 0.0

    def _fire(self, batch: list[Path]) -> None:
        self.stats.callbacks += 1
        self.stats.last_callback_at = time.time()
        try:
            self.on_change(batch)
        except Exception:
            self.stats.errors += 1
            log.exception("mdrecall watch callback failed; the watcher keeps running")
