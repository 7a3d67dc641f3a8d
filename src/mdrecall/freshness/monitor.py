"""The one place that decides whether a search may trust the index, and keeps it fresh in the background.

Freshness does not trust events alone. A search re-checks the files (a sync, or with
``sync.onSearch`` off a walk with mtime+size) whenever the index is marked dirty, a watcher has
unprocessed events, or the last check's snapshot says something moved (one ``stat`` per known file;
a full walk every ``sync.reconcileIntervalMs``). With a live watcher the snapshot check is skipped:
events report changes and a background re-check every ``sync.watchReconcileIntervalMs`` catches any
the watcher missed. A watcher is trusted only once a check that found the files unchanged began
after its watches were attached (attaching runs in the background, seconds at 100k files; right
after, the watcher's thread runs that check itself). A new process starts from the snapshot its
index's last complete sync stored (freshness/snapshot.py): if no file or directory moved since, its
first search does not walk the files (~0.3 s of stats at 100k files instead of seconds). When the
files are known to differ from the index and it could not be refreshed within ``sync.searchWaitMs``,
the answer is marked stale and a warning says why.

Background work, all stopped by :meth:`FreshnessMonitor.stop`: the file watcher (``sync.watch``) and
interval syncs (``sync.intervalMinutes``, and with a watcher its re-check).

Why this module is long: when a search may skip its check, what the sync that follows starts from
(a full walk, a check's look, a watcher's events) and when the watcher is trusted are one decision
over the same state; split across modules, each part would have to know the others' rules.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mdrecall.config import MemoryConfig
from mdrecall.freshness.deltas import SessionDeltaTracker
from mdrecall.freshness.snapshot import Delta, Snapshot, make_snapshot
from mdrecall.freshness.watcher import MemoryWatcher
from mdrecall.index.changes import Observed, PendingChanges
from mdrecall.index.syncing import SyncRun
from mdrecall.sources.transcripts import list_transcripts
from mdrecall.types import Freshness, SyncReport

log = logging.getLogger(__name__)

#: ``SyncReport.rebuild_reason`` of a sync that gave up waiting for another writer.
BUSY_OTHER_PROCESS = "another process is syncing"
BUSY_OTHER_THREAD = "another sync in this process is running"
BUSY = (BUSY_OTHER_PROCESS, BUSY_OTHER_THREAD)
#: ``SyncReport.rebuild_reason`` of a manager that may not write its index (``store.readOnly``).
READ_ONLY = "the index is read-only here (store.readOnly)"
NOT_SYNCED = (*BUSY, READ_ONLY)

#: How a stale answer's warning ends when files are not indexed yet (the builtin engine then reads
#: them directly and says so instead).
MAY_MISS = "results may miss them"

#: ``reporter(paths, report, seconds)`` after each sync the watcher triggered.
SyncReporter = Callable[[list[Path], SyncReport, float], None]


@dataclass(slots=True)
class Comparison:
    """The files on disk compared with the index (see :mod:`mdrecall.index.changes`)."""

    pending: PendingChanges
    #: Why the stored index does not fit the configuration (a rebuild is needed), or None.
    mismatch: str | None
    has_index: bool
    dirs: dict[str, int] = field(default_factory=dict)
    dirs_racy: bool = False
    observed: Mapping[str, Observed] = field(default_factory=dict)
    #: ``time.monotonic()`` when the comparison began (before its directory scan); 0: unknown.
    started: float = 0.0


class FreshnessTarget(Protocol):
    """What the monitor needs from an engine."""

    workspace: Path
    config: MemoryConfig

    def run_sync(self, *, lock_timeout: float | None, defer_sessions: bool) -> SyncReport: ...

    def compare_with_files(self) -> Comparison: ...

    def index_last_sync_at(self) -> float | None: ...


@runtime_checkable
class Monitored(Protocol):
    """A manager kept fresh by a FreshnessMonitor (the builtin engine, QMD, Postgres)."""

    monitor: FreshnessMonitor


#: A tree with this many indexed files attaches its watcher only once the process's first search has
#: ended (or ``ATTACH_HOLD_S`` after the start, whichever comes first). watchfiles walks the tree to
#: attach while holding the GIL (1.4 s at 100k files, docs/benchmarks.md "Freshness"), and a first
#: search beside it waited for all of it. Until the watcher is attached and a check after that found
#: the files unchanged, searches check the files themselves, as they always have: holding it back
#: costs no freshness. Small trees attach in milliseconds and are not held.
HOLD_ATTACH_ABOVE_FILES = 5_000
ATTACH_HOLD_S = 2.0


def _iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds") if epoch else None  # people read it too


class FreshnessMonitor:
    def __init__(self, target: FreshnessTarget) -> None:
        self.target = target
        self.config = target.config
        self._dirty = True
        self._generation = 0  # bumped by mark_dirty, so a sync that started earlier cannot clear it
        self._snapshot: Snapshot | None = None  # what the last full comparison saw
        self._checked_at: float | None = None  # wall time of the last comparison of files with the index
        self._last_check_at = 0.0  # the same, monotonic
        # monotonic start of the last check that found the index matching the files (a sync, a
        # comparison, a snapshot check): a watcher is trusted only once one began after it attached.
        self._verified_at = float("-inf")
        self._counts: dict[str, int | None] = {}
        self._sessions_seen: set[str] = set()
        self._watcher: MemoryWatcher | None = None
        self._watcher_error: str | None = None
        self._tracker = SessionDeltaTracker.from_config(self.config)
        self._reporters: list[SyncReporter] = []
        self._interval_thread: threading.Thread | None = None
        self._attach = threading.Event()  # set: a held watcher may attach now
        self._look_at_all = False  # mark_dirty(look_at_all=True) since the last sync's base was chosen
        self._stop = threading.Event()
        #: What the last comparison without a sync found not indexed (None: nothing, or synced since).
        self._pending: PendingChanges | None = None
        #: A new process: the index's stored snapshot, which found the files moved (the first sync
        #: starts from it).
        self._stored_base: tuple[Snapshot, Delta] | None = None
        #: What the last check of the snapshot found moved (the sync that follows starts from it).
        self._moved: tuple[Snapshot, Delta] | None = None

    # -- state ------------------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return self._dirty

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def watcher(self) -> MemoryWatcher | None:
        return self._watcher

    def mark_dirty(self, *, look_at_all: bool = False) -> None:
        """The files changed. ``look_at_all``: a change no watcher event may name yet (a write of the
        host's own, ``manager.mark_dirty``): the next sync looks at every file, not at the events."""
        self._generation += 1
        self._dirty = True
        if look_at_all:
            self._look_at_all = True

    def unindexed(self) -> tuple[list[str], list[str]]:
        """(new or changed, deleted) files the last search's comparison found the index without;
        both empty once a sync has caught up. A search answering stale reads the first directly
        (search/filescan.py) and leaves out the index's hits of both."""
        pending = self._pending
        if pending is None:
            return [], []
        return [*pending.new, *pending.changed], list(pending.deleted)

    def invalidate(self) -> None:
        """The index was replaced (recovered from damage): compare everything again."""
        self._snapshot = self._stored_base = self._moved = None
        self.mark_dirty()

    def synced(
        self, run: SyncRun, dirs: tuple[dict[str, int], bool], generation: int, files_indexed: int, started: float | None = None
    ) -> None:
        """A sync finished: the index matches the files it saw (``dirs``: :func:`scan_dirs` taken
        before it listed them; ``started``: ``time.monotonic()`` before that scan)."""
        report = run.report
        if self._generation == generation:
            self._dirty = False
        self._pending = None
        if started is not None:
            self._verified_at = max(self._verified_at, started)
            if self._watcher is not None and "sessions" not in self.config.sources:
                # The watcher need not sync these events again. (Transcript events mean "index the
                # appends now": a search's sync may have deferred them.)
                self._watcher.covered(started)
        self._snapshot = make_snapshot(dirs[0], dirs[1], run.observed, run.carried, run.deferred)
        self._checked_at = time.time()
        self._last_check_at = time.monotonic()
        self._counts = {
            "filesOnDisk": report.files_scanned,
            "filesIndexed": files_indexed,
            "pendingChanges": report.files_deferred,
            "deferredSessions": report.files_deferred,
        }

    def compared(self, comparison: Comparison, generation: int) -> None:
        """A comparison without a sync (status, a search that could not sync): keep what it learned."""
        pending = comparison.pending
        self._pending = pending if pending.count else None
        self._checked_at = time.time()
        self._last_check_at = time.monotonic()
        self._counts = {
            "filesOnDisk": pending.files_on_disk,
            "filesIndexed": pending.files_indexed,
            "pendingChanges": pending.count,
            "deferredSessions": len(pending.deferred),
        }
        if pending.outstanding == 0 and comparison.mismatch is None:
            self._snapshot = make_snapshot(comparison.dirs, comparison.dirs_racy, comparison.observed,
                                           deferred=pending.deferred_files)  # fmt: skip
            if comparison.started:
                self._verified_at = max(self._verified_at, comparison.started)
            if self._generation == generation:
                self._dirty = False  # someone else's sync already covered it
        else:
            self._snapshot = None  # check again on the next search

    # -- before a search --------------------------------------------------------------------------
    def needs_check(self) -> bool:
        """Whether this search must compare the files with the index (sync, or walk) first."""
        snapshot = self._snapshot
        if self._dirty or self._checked_at is None or snapshot is None:
            return True
        watcher = self._watcher
        if watcher is not None and watcher.has_pending():
            return True  # events not yet synced by the watcher: do not wait for its debounce
        if self._watcher_trusted():
            # Events report changes and the background re-check catches what they miss: searches
            # skip the walk and the per-file stat (5 µs a file: 30 ms at 10k files).
            return False
        if watcher is not None and watcher.running and watcher.attached_at is not None:
            return not self._verify(snapshot)  # once after the watch attached; then it is trusted
        if time.monotonic() - self._last_check_at >= self.config.sync.reconcileIntervalMs / 1000.0:
            return True  # a full walk now and then, whatever the quick check says
        return not self._verify(snapshot)

    def unchanged_token(self) -> object | None:
        """While the watcher is trusted, the index clean and no event waits: a token that stays the
        same until the watcher sees a change. A search's caches of what files hold (the lines of
        citations, search/filelines.py) may take a file they checked under the same token as
        unchanged without a ``stat``, as the search itself skips its check then. None: check."""
        watcher = self._watcher
        if watcher is None or self._dirty or not self._watcher_trusted() or watcher.has_pending():
            return None
        return watcher.seen()

    def _watcher_trusted(self) -> bool:
        """A running watcher, attached before the last check that found the files unchanged: since
        then every change has produced an event."""
        watcher = self._watcher
        if watcher is None or not watcher.running:
            return False
        attached = watcher.attached_at
        return attached is not None and self._verified_at >= attached

    def _verify(self, snapshot: Snapshot) -> bool:
        """Whether the files are still as ``snapshot`` saw them (one stat each); records when, and
        when they moved, what moved (the sync that follows starts from it)."""
        started = time.monotonic()
        delta = snapshot.delta()
        if delta is None or delta.moved:
            self._moved = (snapshot, delta) if delta is not None else None
            return False
        self._verified_at = max(self._verified_at, started)
        return True

    def _check_stored(self) -> bool:
        """A new process: whether the files are as the last complete sync saw them, from the
        snapshot stored in the index (freshness/snapshot.py), instead of a full comparison. On
        success that snapshot is this process's."""
        stored = getattr(self.target, "stored_snapshot", None)  # engines that store one (the builtin)
        if stored is None:
            return False
        generation = self._generation
        try:
            snapshot = stored()
        except Exception as exc:  # a damaged index: the sync that follows deals with it
            log.debug("mdrecall: stored freshness snapshot unusable: %s", exc)
            return False
        if snapshot is None:
            return False
        started = time.monotonic()
        delta = snapshot.delta()  # what moved, not only whether: the first sync starts from it
        if delta is None:
            return False
        if delta.moved:
            self._stored_base = (snapshot, delta)
            return False
        self._verified_at = max(self._verified_at, started)
        self._snapshot = snapshot
        self._checked_at = time.time()
        self._last_check_at = time.monotonic()
        self._counts = {"filesOnDisk": len(snapshot.files), "filesIndexed": len(snapshot.files), "pendingChanges": 0, "deferredSessions": 0}
        if self._generation == generation:
            self._dirty = False
        return True

    def before_search(self, session_key: str | None) -> tuple[bool, list[str]]:
        """Bring the index up to date for a search, within ``sync.searchWaitMs``: (stale, warnings)."""
        session_start = bool(session_key) and self.config.sync.onSessionStart and session_key not in self._sessions_seen
        if session_key and session_start:
            self._sessions_seen.add(session_key)
        if not session_start and self._checked_at is None and self._generation == 0 and self._check_stored():
            return False, []  # a new process whose files are as its index's last sync saw them
        if not (session_start or self.needs_check()):
            return False, []
        if not (self.config.sync.onSearch or session_start):
            return self._stale_if_pending("automatic sync is off (sync.onSearch: false)")
        wait_ms = self.config.sync.searchWaitMs
        try:
            # A new session indexes its transcripts in full; other automatic syncs honour the deltas.
            report = self._sync(lock_timeout=wait_ms / 1000.0, defer_sessions=not session_start,
                                base=None if session_start else self._sync_base(checked=True))  # fmt: skip
        except Exception as exc:  # never let a failing sync break search
            return self._stale_if_pending(f"index could not be refreshed ({type(exc).__name__}: {exc})")
        if report.rebuild_reason == READ_ONLY:
            return self._stale_if_pending(READ_ONLY)
        if report.rebuild_reason in BUSY:
            return self._stale_if_pending(f"{report.rebuild_reason} (waited {wait_ms} ms)")
        return False, []

    def _sync(self, *, lock_timeout: float | None, defer_sessions: bool, base: tuple[Snapshot, Delta | None] | None) -> SyncReport:
        """A sync, from ``base`` (a snapshot, and what moved since if known) where there is one and
        the engine can start from it (index/scope.py)."""
        sync_since = getattr(self.target, "sync_since", None)  # engines that can (the builtin)
        if base is not None and sync_since is not None:
            report: SyncReport = sync_since(*base, lock_timeout=lock_timeout, defer_sessions=defer_sessions)
            return report
        return self.target.run_sync(lock_timeout=lock_timeout, defer_sessions=defer_sessions)

    def _sync_base(self, *, checked: bool, events: list[Path] | None = None) -> tuple[Snapshot, Delta | None] | None:
        """The snapshot an automatic sync may start from instead of walking every file: the last one
        taken when the index matched the files, and what its last check found moved when
        ``checked`` (a search's sync: that check's time counts as the sync's, so what moved after it
        is left for the next check; a watcher's sync never reuses a check, as its events are spent).
        None when a full walk is due (without a trusted watcher, every ``sync.reconcileIntervalMs``).
        Transcript appends a sync left for later are in the snapshot (``Snapshot.deferred``): the
        next sync examines them again, as a full walk would. With a trusted watcher, what moved is
        what its events name (:meth:`_events_delta`; ``events``: those handed to the watcher's sync)."""
        stored, self._stored_base = self._stored_base, None
        snapshot, moved, self._moved = self._snapshot, self._moved, None
        look_at_all, self._look_at_all = self._look_at_all, False  # whatever follows looks at every file
        if stored is not None:
            return stored if checked else (stored[0], None)
        if snapshot is None:
            return None
        delta = moved[1] if checked and moved is not None and moved[0] is snapshot else None
        if self._watcher_trusted():
            if delta is None and not look_at_all and (events is not None or not self._dirty):
                delta = self._events_delta(snapshot, events or [])
            return snapshot, delta
        if time.monotonic() - self._last_check_at >= self.config.sync.reconcileIntervalMs / 1000.0:
            return None
        return snapshot, delta

    def _events_delta(self, snapshot: Snapshot, events: list[Path]) -> Delta | None:
        """What moved since ``snapshot``, from the trusted watcher's events (``events`` and those
        still pending) instead of a ``stat`` of every file: a change is on disk before its event, so
        every event that arrived before this look is in it, and later ones stay pending (the sync
        covers the events before its start, ``MemoryWatcher.covered``). Searches already trust these
        events to skip their check; the watcher's background re-check still compares everything.
        With transcripts among the sources every transcript and host log is looked at too: an
        append below the thresholds raises no event, and the full look would examine it. None (the
        full look) where the snapshot cannot tell (``Snapshot.delta_of``). Not while the index is dirty for another reason (a write of the
        host's own whose event may not have arrived, an earlier sync that failed after its events
        were spent): the full look then decides."""
        watcher = self._watcher
        if watcher is None:
            return None
        started = time.monotonic()
        paths: list[Path] = [*events, *watcher.pending_paths()]
        if "sessions" in self.config.sources:
            from mdrecall.sources.hostlogs import list_host_logs

            paths += [path for _, path in list_transcripts(self.target.workspace, self.config.sessions.dir)]
            paths += [path for _, path in list_host_logs(self.config)]
        return snapshot.delta_of(paths, started)

    def _stale_if_pending(self, reason: str) -> tuple[bool, list[str]]:
        """Compare the files with the index (no lock) and judge whether the answer is stale."""
        generation = self._generation
        try:
            comparison = self.target.compare_with_files()
        except Exception as exc:
            self._snapshot = None
            return True, [f"{reason}; the index could not be compared with the files ({type(exc).__name__}: {exc})"]
        self.compared(comparison, generation)
        outstanding = comparison.pending.outstanding
        if outstanding == 0 and comparison.mismatch is None:
            return False, []
        if not comparison.has_index or not comparison.pending.files_indexed:  # none, or a first one being built
            return True, [f"{reason}; no index yet ({outstanding} file(s) not indexed), {MAY_MISS}"]
        if outstanding > 0:
            return True, [f"{reason}; {outstanding} file(s) changed since the last sync, {MAY_MISS}"]
        return True, [f"{reason}; the index must be rebuilt ({comparison.mismatch}), results may be incomplete"]

    def freshness(self, stale: bool) -> Freshness:
        counts = self._counts
        return Freshness(
            stale=stale,
            checked_at=_iso(self._checked_at),
            last_sync_at=_iso(self.target.index_last_sync_at()),
            files_on_disk=counts.get("filesOnDisk"),
            files_indexed=counts.get("filesIndexed"),
            pending_changes=counts.get("pendingChanges"),
            deferred_sessions=counts.get("deferredSessions") or 0,
            dirty=self._dirty,
            watcher=self._watcher_state(),
        )

    # -- background -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start what ``sync`` asks for: the watcher (``watch``) and interval syncs."""
        if self.config.sync.watch and self._watcher is None:
            try:
                # Attaching to a large tree takes seconds (inotify, one watch per directory): it
                # happens in the background; until then, and until a check after it, searches check
                # the files themselves.
                self._watcher = MemoryWatcher(
                    self.target.workspace,
                    self.config,
                    self._on_change,
                    session_tracker=self._tracker,
                    force_polling=True if self.config.sync.watchPolling else None,
                    on_attached=self._watcher_attached,
                    hold=self._attach if self._large_tree() else None,
                    hold_s=ATTACH_HOLD_S,
                ).start(wait_ready=0)
                self._watcher_error = None
            except Exception as exc:  # missing watchfiles, inotify limits: searches still reconcile
                self._watcher_error = f"{type(exc).__name__}: {exc}"
                log.warning("mdrecall: file watcher not started (%s); searches still check the files", exc)
        if self.background_period() is not None and self._interval_thread is None:
            self._interval_thread = threading.Thread(target=self._interval_loop, name="mdrecall-interval-sync", daemon=True)
            self._interval_thread.start()

    def _large_tree(self) -> bool:
        count = getattr(self.target, "indexed_file_count", None)  # engines that can tell cheaply
        if count is None:
            return False
        try:
            return int(count()) >= HOLD_ATTACH_ABOVE_FILES
        except Exception:  # a damaged or missing index: nothing to hold the watcher for
            return False

    def first_search_hold(self) -> tuple[threading.Event | None, float]:
        """What background work that competes with the first search for the cores waits for (the
        index's full integrity check): a large tree's first search ending, at most ``ATTACH_HOLD_S``,
        as the watcher's attach does; (None, 0) for a small tree."""
        return (self._attach, ATTACH_HOLD_S) if self._large_tree() else (None, 0.0)

    def attach_now(self) -> None:
        """Let a watcher held back for the first search attach now: a search ended, or watching is
        the caller's job (``mdrecall watch``)."""
        self._attach.set()

    def _watcher_attached(self) -> None:
        """On the watcher's thread, once its watches are attached: check the files against the last
        snapshot now, so searches can trust the watcher without checking themselves."""
        snapshot = self._snapshot
        if snapshot is not None and not self._dirty and not self._verify(snapshot):
            self.mark_dirty()  # something moved before the watch was attached: the next search syncs

    def add_sync_reporter(self, reporter: SyncReporter) -> None:
        """``reporter(paths, report, seconds)`` after each sync the watcher triggers (``mdrecall watch``)."""
        self._reporters.append(reporter)

    def _on_change(self, paths: list[Path]) -> None:
        # Runs on the watcher's dispatch thread: syncs it triggers never overlap each other, and
        # events arriving during a sync are batched into the next one.
        clean = not self._dirty  # dirty: an earlier sync failed (its events are spent) or a write of the host's own
        self.mark_dirty()
        started = time.monotonic()
        base = self._sync_base(checked=False, events=paths if clean else None)
        report = self._sync(lock_timeout=None, defer_sessions=False, base=base)
        if "sessions" in self.config.sources:
            # The sync reconciled every transcript, including appends below the thresholds.
            self._tracker.prime(p for _, p in list_transcripts(self.target.workspace, self.config.sessions.dir))
        for reporter in list(self._reporters):
            reporter(paths, report, time.monotonic() - started)

    def background_period(self) -> float | None:
        """Seconds between background syncs: ``intervalMinutes``, and with a watcher its re-check."""
        periods = []
        if self.config.sync.intervalMinutes > 0:
            periods.append(self.config.sync.intervalMinutes * 60.0)
        if self._watcher is not None and self.config.sync.watchReconcileIntervalMs > 0:
            periods.append(self.config.sync.watchReconcileIntervalMs / 1000.0)
        return min(periods) if periods else None

    def _interval_loop(self) -> None:
        period = self.background_period() or 60.0
        while not self._stop.wait(period):
            try:
                # Someone else syncing right now is as good as our own sync: do not queue behind it.
                self.target.run_sync(lock_timeout=1.0, defer_sessions=True)
            except Exception as exc:
                log.warning("mdrecall: background sync failed: %s", exc)

    def _watcher_state(self) -> Any:
        if self._watcher is None:
            return "failed" if self._watcher_error else "off"
        return "running" if self._watcher.running else "stopped"

    def status(self) -> dict[str, Any]:
        """The watcher's and interval syncs' state, for ``status()``."""
        if self._watcher is not None:
            watcher: dict[str, Any] | None = self._watcher.status()
        else:
            watcher = {"running": False, "error": self._watcher_error} if self._watcher_error else None
        running = self._interval_thread is not None and self._interval_thread.is_alive()
        return {
            "watcher": watcher,
            "intervalSync": {
                "minutes": self.config.sync.intervalMinutes,
                "running": running,
                "periodSeconds": self.background_period(),
            },
        }

    def stop(self) -> None:
        self._stop.set()
        self._attach.set()
        if self._watcher is not None:
            self._watcher.stop()
        thread = self._interval_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
