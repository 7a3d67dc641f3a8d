"""The builtin MemorySearchManager: ties discovery, sync, the store and search together.

Threading: searches read through one connection, syncs write through another (WAL lets both run at
once). Across processes, one writer at a time holds ``<db>.lock``; a search never waits for another
process's (or thread's) sync longer than ``sync.searchWaitMs`` and says so when it answers from an
index it could not refresh.

Freshness does not trust events: a search re-checks the files (a sync, or with ``sync.onSearch`` off
a walk with mtime+size) whenever the index is marked dirty, a watcher has unprocessed events, or the
last check is older than ``sync.reconcileIntervalMs``. Every response carries ``freshness``; when the
index is known to differ from the files and could not be refreshed in time, ``stale`` is set and a
warning says why. See docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import apsw

from mdrecall.config import MemoryConfig, load_config
from mdrecall.crashpoints import crash_point
from mdrecall.embeddings.base import provider_key as compute_provider_key
from mdrecall.embeddings.registry import ProviderSelection, activate_fallback, select_provider
from mdrecall.errors import EmbeddingError, MdrecallError, PathError, StoreError
from mdrecall.freshness import Snapshot, make_snapshot, scan_dirs
from mdrecall.search.budget import lengths_for
from mdrecall.search.pipeline import SearchPlan, VectorSearch, run_search
from mdrecall.search.scope import Scope
from mdrecall.search.vector import InProcessVectors, sqlite_vec_search
from mdrecall.store import WriterLock, cleanup_stale_rebuilds, default_store_path, rebuild_path, remove_db_files, swap_in
from mdrecall.store.db import SCHEMA_VERSION, IndexDB, StoreOptions
from mdrecall.sync import Indexer, ProgressCallback, SourceAdapter, SyncContext, seed_cache_from
from mdrecall.types import ProbeResult, SearchResponse, SyncProgress, SyncReport
from mdrecall.workspace import discover_memory_files, resolve_memory_path

SearchListener = Callable[[str, SearchResponse, "str | None", datetime], None]

log = logging.getLogger(__name__)

#: What SQLite raises on a damaged database file: the index is then rebuilt from the files.
CORRUPTION_ERRORS = (apsw.CorruptError, apsw.NotADBError)
#: ``SyncReport.rebuild_reason`` of a sync that gave up waiting for another writer.
BUSY_OTHER_PROCESS = "another process is syncing"
BUSY_OTHER_THREAD = "another sync in this process is running"
_BUSY = (BUSY_OTHER_PROCESS, BUSY_OTHER_THREAD)
#: Where the index records when any process last finished a sync (epoch seconds).
LAST_SYNC_KEY = "last_sync_at"


def _is_corruption(exc: BaseException) -> bool:
    """A damaged index file, raised directly or wrapped in a StoreError when opening it."""
    return isinstance(exc, CORRUPTION_ERRORS) or isinstance(exc.__cause__, CORRUPTION_ERRORS)


def _iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat() if epoch else None


@runtime_checkable
class MemorySearchManager(Protocol):
    """The contract every backend implements (builtin, LanceDB, QMD, plugins)."""

    def search(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        session_key: str | None = None,
        sources: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> SearchResponse: ...

    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...

    def sync(self, force: bool = False, progress: ProgressCallback | None = None) -> SyncReport: ...

    def probe_embedding_availability(self) -> ProbeResult: ...

    def probe_vector_availability(self) -> bool: ...

    def close(self) -> None: ...


def _scope_hash(workspace: Path, config: MemoryConfig) -> str:
    from mdrecall.embeddings.base import provider_key
    from mdrecall.workspace import extra_path_roots

    roots = sorted(p.as_posix() for p in extra_path_roots(workspace, config))
    return provider_key({"extraPaths": roots, "maxFileBytes": config.limits.maxFileBytes, "sessionsDir": config.sessions.dir})


class BuiltinMemoryManager:
    backend = "builtin"

    def __init__(self, workspace: Path, config: MemoryConfig, *, store_options: StoreOptions | None = None) -> None:
        self.workspace = workspace
        self.config = config
        self.db_path = Path(config.store.path).expanduser() if config.store.path else default_store_path(workspace)
        self._store_options = store_options or StoreOptions()
        self._store_options.fts_enabled = config.query.fts.enabled
        self._store_options.fts_tokenizer = config.query.fts.tokenizer
        self._store_options.vector_enabled = config.store.vector.enabled
        self._store_options.vector_extension_path = config.store.vector.extensionPath
        self._store_options.busy_timeout_ms = config.store.busyTimeoutMs
        self._lock = WriterLock(self.db_path)
        self._sync_mutex = threading.RLock()
        self._read_mutex = threading.Lock()
        self._provider_mutex = threading.Lock()
        self._selection: ProviderSelection | None = None
        self._provider_key: str | None = None
        self._vectors = InProcessVectors(max_bytes=config.store.vector.memoryCacheMiB * 2**20)
        self._listeners: list[SearchListener] = []
        self._read_listeners: list[Callable[[str, int, int, datetime], None]] = []
        self._flush_hooks: list[Callable[[], object]] = []
        self._close_hooks: list[Callable[[], object]] = []
        #: Progress of a rebuild in this process (model switch, chunking change), else None.
        self._migration: dict[str, Any] | None = None
        self._dirty = True
        self._dirty_generation = 0  # bumped by mark_dirty, so a sync that started earlier cannot clear it
        self._last_sync_at: float | None = None
        self._checked_at: float | None = None  # wall time of the last comparison of files with the index
        self._last_freshness: dict[str, Any] = {}
        self._snapshot: Snapshot | None = None  # what the last full check saw (freshness.py)
        self._observed: dict[str, tuple[int, int, int]] = {}
        self._recovery_reported = False
        self._watcher: Any = None
        self._watcher_error: str | None = None
        self._interval_thread: threading.Thread | None = None
        self._stop_background = threading.Event()
        self._last_check_at: float = 0.0
        self._last_error: str | None = None
        self._last_report: SyncReport | None = None
        self._sessions_seen: set[str] = set()
        self._closed = False
        self._recovered: str | None = None
        self.extra_sources: list[SourceAdapter] = []
        #: Set by dreaming's install_recall_tracking (a RecallWriter), else None.
        self.recall_writer: Any = None
        if "sessions" in config.sources:
            self.extra_sources.append(self._sessions_adapter())
        self._integrity = "pending"  # the full check of the index, run by start_background()
        self._verify_conn: apsw.Connection | None = None
        self._verify_thread: threading.Thread | None = None
        self._read_db = self._open_db()

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> "BuiltinMemoryManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for hook in self._close_hooks:  # background writers (recall tracking) drain first
            try:
                hook()
            except Exception as exc:
                log.warning("mdrecall: close hook failed: %s", exc)
        self._stop_background.set()
        verifying = self._verify_conn
        if verifying is not None:
            verifying.interrupt()  # a full check of a large index must not hold up close()
        if self._verify_thread is not None and self._verify_thread is not threading.current_thread():
            self._verify_thread.join(5.0)
        if self._watcher is not None:
            self._watcher.stop()
        if self._interval_thread is not None and self._interval_thread is not threading.current_thread():
            self._interval_thread.join(5.0)
        with self._read_mutex:
            self._read_db.close()
        provider = self._selection.provider if self._selection is not None else None
        closer = getattr(provider, "close", None)
        if closer is not None:
            closer()  # remote providers hold HTTP connection pools

    def _try_open(self, full: bool = False) -> tuple[IndexDB | None, str | None]:
        """Open the index and check it: the cheap probe, or ``full`` (``PRAGMA quick_check``, which
        reads the whole file: 0.5 s at 10k chunks with vectors) once damage was seen."""
        try:
            db = IndexDB(self.db_path, self._store_options)
        except StoreError as exc:
            return None, str(exc)
        if db.integrity_ok() if full else db.probe_ok():
            return db, None
        db.close()
        return None, "integrity check failed" if full else "structural probe failed"

    def _open_db(self, *, cause: str | None = None, lock_held: bool = False) -> IndexDB:
        """Open the live index; a corrupt file is moved aside and rebuilt from the Markdown.

        Only the index files are moved (never anything under the workspace), under the writer lock
        and after a second check, so two processes finding the same damage do not move each other's
        fresh replacement aside. ``cause``: corruption already seen while the index was in use (skip
        the first check); ``lock_held``: the caller holds the writer lock.
        """
        reason = cause
        if cause is None:
            db, reason = self._try_open()
            if db is not None:
                return db
        got = lock_held or self._lock.acquire(self._store_options.busy_timeout_ms / 1000.0)
        try:
            db, again = self._try_open(full=cause is not None)
            if db is not None:
                return db  # another process recovered it while we waited (or the error was not lasting)
            aside = self.db_path.with_name(f"{self.db_path.name}.corrupt-{time.time_ns()}")
            for suffix in ("", "-wal", "-shm"):
                src = Path(str(self.db_path) + suffix)
                if src.exists():
                    os.replace(src, Path(str(aside) + suffix))
            self._recovered = (
                f"index at {self.db_path} was unreadable ({again or reason}); moved to {aside} and rebuilt from the files"
            )
            self._recovery_reported = False
            log.warning("mdrecall: %s", self._recovered)
            return IndexDB(self.db_path, self._store_options)
        finally:
            if got and not lock_held:
                self._lock.release()

    def _recovering(self, call: Callable[[], Any], *, lock_held: bool = False) -> Any:
        """``call()``, and once more after recovering the index if SQLite reports it damaged."""
        try:
            return call()
        except (StoreError, *CORRUPTION_ERRORS) as exc:
            if not _is_corruption(exc):
                raise
            self._recover_in_use(exc, lock_held=lock_held)
            return call()

    def _recover_in_use(self, exc: BaseException, *, lock_held: bool) -> None:
        """SQLite reported corruption while the index was in use (a damaged disk, a file overwritten
        under us): reopen it after a full check, or move it aside and start over from the files."""
        got = lock_held or self._lock.acquire(self._store_options.busy_timeout_ms / 1000.0)
        if not got:
            # Another writer holds the index: never move a file aside under it. It (or the next
            # search) meets the same damage and recovers.
            raise exc
        try:
            with self._read_mutex:
                self._read_db.close()
                self._read_db = self._open_db(cause=f"{type(exc).__name__}: {exc}", lock_held=True)
        finally:
            if not lock_held:
                self._lock.release()
        self._snapshot = None
        self.mark_dirty()

    def _sessions_adapter(self) -> SourceAdapter:
        from mdrecall.sessions import SessionSource

        return SessionSource(self.workspace, self.config)

    # -- provider --------------------------------------------------------------------------------
    def _selection_or_select(self) -> ProviderSelection:
        with self._provider_mutex:
            if self._selection is None:
                self._selection = select_provider(self.config)
                provider = self._selection.provider
                if provider is not None:
                    self._provider_key = compute_provider_key(provider.identity)
                else:
                    self._provider_key = compute_provider_key({"provider": "none", "model": "fts-only"})
            return self._selection

    @property
    def provider(self):  # type: ignore[no-untyped-def]
        return self._selection_or_select().provider

    def _desired_meta(self) -> dict[str, Any]:
        selection = self._selection_or_select()
        provider = selection.provider
        return {
            "schemaVersion": SCHEMA_VERSION,
            "model": provider.model if provider else "fts-only",
            "provider": provider.id if provider else "none",
            "providerKey": self._provider_key,
            "sources": sorted(self.config.sources),
            "scopeHash": _scope_hash(self.workspace, self.config),
            "chunkTokens": self.config.chunking.tokens,
            "chunkOverlap": self.config.chunking.overlap,
            "vectorDims": provider.dims if provider else None,
            "ftsTokenizer": self.config.query.fts.tokenizer,
        }

    def _identity_mismatch(self, stored: dict[str, Any] | None, desired: dict[str, Any]) -> str | None:
        if stored is None:
            return "no index yet"
        for key, value in desired.items():
            if stored.get(key) != value:
                return f"{key} changed ({stored.get(key)!r} → {value!r})"
        return None

    # -- sync ------------------------------------------------------------------------------------
    def mark_dirty(self, paths: Sequence[str] | None = None) -> None:
        self._dirty_generation += 1
        self._dirty = True

    def sync(
        self,
        force: bool = False,
        progress: ProgressCallback | None = None,
        *,
        lock_timeout: float | None = None,
        defer_sessions: bool = False,
    ) -> SyncReport:
        """Bring the index up to date with the files. Blocks while another thread or process syncs,
        or gives up after ``lock_timeout`` seconds and returns an empty report whose
        ``rebuild_reason`` is ``BUSY_OTHER_THREAD`` / ``BUSY_OTHER_PROCESS``. ``defer_sessions`` lets
        growing transcripts wait for their delta thresholds (automatic syncs)."""
        deadline = None if lock_timeout is None else time.monotonic() + max(0.0, lock_timeout)
        if not self._sync_mutex.acquire(timeout=-1 if lock_timeout is None else max(0.0, lock_timeout)):
            report = SyncReport()
            report.rebuild_reason = BUSY_OTHER_THREAD
            return report
        try:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._lock.acquire(remaining):
                report = SyncReport()
                report.rebuild_reason = BUSY_OTHER_PROCESS
                return report
            try:
                crash_point("sync:locked")
                run = lambda: self._sync_locked(force, progress, defer_sessions)  # noqa: E731
                try:
                    return self._recovering(run, lock_held=True)
                except EmbeddingError as exc:
                    if not self._switch_to_fallback(exc):
                        raise
                    return self._recovering(run, lock_held=True)  # new provider identity: a full rebuild
            except Exception as exc:
                self._last_error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                self._lock.release()
        finally:
            self._sync_mutex.release()

    def _switch_to_fallback(self, error: EmbeddingError) -> bool:
        """An explicit provider failed during sync: switch to ``fallback`` once (recorded in status)."""
        with self._provider_mutex:
            selection = self._selection
            if selection is None or selection.provider is None:
                return False
            switched = activate_fallback(selection, self.config, error)
            if switched is None or switched.provider is None:
                return False
            old = selection.provider
            self._selection = switched
            self._provider_key = compute_provider_key(switched.provider.identity)
        closer = getattr(old, "close", None)
        if closer is not None:
            closer()
        return True

    def _sync_locked(self, force: bool, progress: ProgressCallback | None, defer_sessions: bool = False) -> SyncReport:
        generation = self._dirty_generation
        cleanup_stale_rebuilds(self.db_path)
        current = self._selection_or_select().provider
        if current is not None and current.dims is None and hasattr(current, "resolve_dims"):
            current.resolve_dims()  # remote models of unknown size: one probe before the identity is fixed
        desired = self._desired_meta()
        selection = self._selection_or_select()
        provider = selection.provider
        ctx = SyncContext(provider, self._provider_key or "", desired["model"])
        dirs, dirs_racy = scan_dirs(self.workspace, self.config)  # before the files are listed
        writer = IndexDB(self.db_path, self._store_options)
        try:
            mismatch = self._identity_mismatch(writer.read_meta(), desired)
            if force or mismatch:
                report = self._rebuild(writer, ctx, desired, progress)
                report.rebuild_reason = "forced" if force and not mismatch else mismatch
            else:
                if provider is not None and provider.dims:
                    writer.ensure_vec_table(provider.dims)
                indexer = Indexer(
                    self.workspace, self.config, writer, ctx, progress, self.extra_sources, defer_sessions=defer_sessions
                )
                report = indexer.run(full=False)
                self._observed = indexer.observed
                with writer.conn:
                    writer.set_kv(LAST_SYNC_KEY, repr(time.time()))
                crash_point("sync:before-finish")
        finally:
            writer.close()
        if self._dirty_generation == generation:
            self._dirty = False
        self._snapshot = make_snapshot(dirs, dirs_racy, self._observed)
        self._last_sync_at = time.time()
        self._checked_at = self._last_sync_at
        self._last_check_at = time.monotonic()
        self._last_error = None
        self._last_report = report
        return report

    def _rebuild(self, live: IndexDB, ctx: SyncContext, desired: dict[str, Any], progress: ProgressCallback | None) -> SyncReport:
        temp_path = rebuild_path(self.db_path)
        built = IndexDB(temp_path, self._store_options)
        try:
            seed_cache_from(built, self.db_path)
            crash_point("rebuild:seeded")
            if ctx.provider is not None and ctx.provider.dims:
                built.ensure_vec_table(ctx.provider.dims)
            stored = live.read_meta() or {}
            self._migration = {
                "from": {"provider": stored.get("provider"), "model": stored.get("model")} if stored else None,
                "to": {"provider": desired["provider"], "model": desired["model"]},
                "completed": 0,
                "total": 0,
                "label": "starting",
            }

            def track(p: SyncProgress) -> None:
                self._migration.update(completed=p.completed, total=p.total, label=p.label)
                if progress is not None:
                    progress(p)

            indexer = Indexer(self.workspace, self.config, built, ctx, track, self.extra_sources)
            report = indexer.run(full=True)
            self._observed = indexer.observed
            with built.conn:
                built.write_meta(desired)
                built.set_kv(LAST_SYNC_KEY, repr(time.time()))
            crash_point("rebuild:built")
            live.close()
            swap_in(built, self.db_path, self._store_options.busy_timeout_ms)
        finally:
            self._migration = None
            built.close()
            remove_db_files(temp_path)
        report.full_rebuild = True
        return report

    def _refresh_for_search(self, session_start: bool) -> tuple[bool, list[str]]:
        """Make the index match the files before a search, within ``sync.searchWaitMs``.

        Returns (stale, warnings). Stale only when the files are known to differ from the index: a
        sync that could not run (busy, failed, or not allowed) is followed by the cheap walk, and a
        busy writer whose work is already visible does not make the answer stale.
        """
        if not (self.config.sync.onSearch or session_start):
            return self._stale_if_pending("automatic sync is off (sync.onSearch: false)")
        wait = self.config.sync.searchWaitMs / 1000.0
        try:
            # A new session indexes its transcripts in full; other automatic syncs honour the deltas.
            report = self.sync(lock_timeout=wait, defer_sessions=not session_start)
        except Exception as exc:  # never let a failing sync break search
            return self._stale_if_pending(f"index could not be refreshed ({type(exc).__name__}: {exc})")
        if report.rebuild_reason in _BUSY:
            return self._stale_if_pending(f"{report.rebuild_reason} (waited {self.config.sync.searchWaitMs} ms)")
        self._last_freshness = {
            "filesOnDisk": report.files_scanned,
            "filesIndexed": self._indexed_count(),
            "pendingChanges": report.files_deferred,
            "deferredSessions": report.files_deferred,
        }
        return False, []

    def _stale_if_pending(self, reason: str) -> tuple[bool, list[str]]:
        """Compare the files with the index (a walk with mtime+size, no lock) and judge staleness."""
        generation = self._dirty_generation
        observed: dict[str, tuple[int, int, int]] = {}
        try:
            dirs, dirs_racy = scan_dirs(self.workspace, self.config)
            with self._read_mutex:
                indexed = self._read_db.files()
                skipped = self._read_db.skipped()
                meta = self._read_db.read_meta()
            pending = self._pending_changes(indexed, skipped, observed)
        except Exception as exc:
            self._snapshot = None
            return True, [f"{reason}; the index could not be compared with the files ({type(exc).__name__}: {exc})"]
        self._checked_at = time.time()
        self._last_check_at = time.monotonic()
        deferred = pending.get("deferredCount", 0)
        outstanding = pending.get("count", 0) - deferred
        self._last_freshness = {
            "filesOnDisk": pending.get("filesOnDisk", len(indexed)),
            "filesIndexed": len(indexed),
            "pendingChanges": pending.get("count", 0),
            "deferredSessions": deferred,
        }
        mismatch = self._stored_identity_mismatch(meta)
        if outstanding > 0 or mismatch is not None:
            self._snapshot = None  # check again on the next search
            if meta is None:
                return True, [f"{reason}; no index yet ({outstanding} file(s) not indexed), results may miss them"]
            if outstanding > 0:
                return True, [f"{reason}; {outstanding} file(s) changed since the last sync, results may miss them"]
            return True, [f"{reason}; the index must be rebuilt ({mismatch}), results may be incomplete"]
        self._snapshot = make_snapshot(dirs, dirs_racy, observed)
        if self._dirty_generation == generation:
            self._dirty = False  # someone else's sync already covered it
        return False, []

    def _indexed_count(self) -> int:
        with self._read_mutex:
            return int(self._read_db.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0])

    def _stored_identity_mismatch(self, meta: dict[str, Any] | None) -> str | None:
        """Why the stored index does not fit the configuration, or None (unknown dims are not a mismatch)."""
        if meta is None:
            return "no index yet"
        desired = {k: v for k, v in self._desired_meta().items() if v is not None}
        return self._identity_mismatch(meta, desired)

    # -- search ----------------------------------------------------------------------------------
    def add_search_listener(self, listener: SearchListener) -> None:
        self._listeners.append(listener)

    def add_flush_hook(self, hook: Callable[[], object]) -> None:
        """``hook()`` runs on :meth:`flush`: wait for background work a listener queued."""
        self._flush_hooks.append(hook)

    def add_close_hook(self, hook: Callable[[], object]) -> None:
        """``hook()`` runs first thing in :meth:`close` (drain and stop a listener's thread)."""
        self._close_hooks.append(hook)

    def flush(self) -> None:
        """Wait until what searches and reads queued in the background (recall tracking) is written."""
        for hook in self._flush_hooks:
            hook()

    def add_read_listener(self, listener: Callable[[str, int, int, datetime], None]) -> None:
        """``listener(path, from_line, lines, now)`` after each successful ``read_file``."""
        self._read_listeners.append(listener)

    def search(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        session_key: str | None = None,
        sources: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> SearchResponse:
        if self._closed:
            raise MdrecallError("manager is closed")
        return self._recovering(lambda: self._search(query, max_results, min_score, session_key, sources, now))

    def _search(
        self,
        query: str,
        max_results: int | None,
        min_score: float | None,
        session_key: str | None,
        sources: Sequence[str] | None,
        now: datetime | None,
    ) -> SearchResponse:
        now = now or datetime.now(timezone.utc)
        if now.tzinfo is None:
            now = now.replace(tzinfo=timezone.utc)
        selection = self._selection_or_select()
        provider = selection.provider
        stale, notes = False, []
        session_start = bool(session_key) and self.config.sync.onSessionStart and session_key not in self._sessions_seen
        if session_start:
            self._sessions_seen.add(session_key)  # type: ignore[arg-type]
        if session_start or self._needs_check():
            stale, notes = self._refresh_for_search(session_start)
        if self._recovered and not self._recovery_reported:
            self._recovery_reported = True
            notes.append(self._recovered)

        text = (query or "").strip()
        configured = list(self.config.sources)
        if sources:
            wanted = [s for s in sources if s in configured]
        else:
            wanted = configured
        freshness = self._freshness(stale)
        base = SearchResponse(
            results=[],
            mode="keyword-only" if provider is None else "hybrid",
            provider=provider.id if provider else "none",
            model=provider.model if provider else "fts-only",
            stale=stale,
            freshness=freshness,
        )
        base.warnings.extend(notes)
        if not text or not wanted:
            return base

        degraded: list[str] = []
        if provider is None:
            degraded.append(f"keyword-only: {selection.unavailable_reason}")
        vector_fn = None
        embed = None
        with self._read_mutex:
            stored = self._read_db.read_meta()
        if provider is not None and stored is not None and stored.get("providerKey") != self._provider_key:
            # The index holds another model's vectors (a rebuild is pending or running): comparing
            # them with this model's query vector would return wrong results. Keywords only until then.
            degraded.append(
                f"vector search paused: the index was built with {stored.get('provider')}/{stored.get('model')}; "
                f"it resumes when the rebuild for {provider.id}/{provider.model} finishes"
            )
        elif provider is not None:
            embed = provider.embed_query
            vector_fn, note = self.vector_search_fn()
            if note:
                degraded.append(note)
        if not self._read_db.caps.fts_available:
            degraded.append(f"no keyword index: {self._read_db.caps.fts_error}")

        q = self.config.query
        plan = SearchPlan(
            query=text,
            max_results=max_results or q.maxResults,
            min_score=q.minScore if min_score is None else min_score,
            scope=self._scope(None if set(wanted) == set(configured) else wanted, session_key),
            now=now,
            line_lengths=lengths_for(self.workspace),
        )
        with self._read_mutex:
            outcome = run_search(
                self._read_db, self.config, plan, embed, vector_fn, degraded, getattr(provider, "languages", None)
            )
        base.results = outcome.results
        base.mode = outcome.mode
        base.degraded = outcome.degraded
        base.warnings.extend(outcome.warnings)
        base.reason = outcome.reason
        for listener in list(self._listeners):
            try:
                listener(text, base, session_key, now)
            except Exception:
                pass  # recall tracking must never break a search
        return base

    def vector_search_fn(self) -> tuple[VectorSearch, str | None]:
        """The KNN for the next search, and why it is degraded (None when it is not): the in-memory
        matrix while it fits ``store.vector.memoryCacheMiB`` (same ranking, ~40× faster), else
        sqlite-vec; the matrix whatever its size when sqlite-vec is unavailable."""
        db = self._read_db
        vec_dims = db.vec_dims() if db.caps.vector_available else None
        if vec_dims is None:
            return self._vectors.search, f"vectors searched in process: {db.caps.vector_error or 'vector table missing'}"
        if self._vectors.fits(db, vec_dims):
            return self._vectors.search, None
        return sqlite_vec_search, None

    def _needs_check(self) -> bool:
        """Whether this search must compare the files with the index (sync, or walk) first."""
        snapshot = self._snapshot
        if self._dirty or self._checked_at is None or snapshot is None:
            return True
        watcher = self._watcher
        if watcher is not None and watcher.has_pending():
            return True  # events not yet synced by the watcher: do not wait for its debounce
        if watcher is not None and watcher.running:
            # A live watcher reports changes as events, and the background re-check
            # (sync.watchReconcileIntervalMs) catches any it misses: searches skip both the walk and
            # the per-file stat (5 µs a file: 30 ms at 10k files) and stay in milliseconds.
            return False
        interval = self.config.sync.reconcileIntervalMs / 1000.0
        if time.monotonic() - self._last_check_at >= interval:
            return True  # a full walk now and then, whatever the quick check says
        return snapshot.changed()  # one stat per known file and directory

    def _scope(self, sources: Sequence[str] | None, session_key: str | None) -> Scope:
        """What one search may see. Memory files are always visible to every session.

        A session always sees its own transcripts. With ``sessions.visibility: all`` a direct
        (private) session also sees the others; a group or channel session key (one containing a
        ``sessions.sharedKeyMarkers`` marker) never sees any transcript but its own, whatever the
        visibility, so a private conversation cannot leak into a group. Applied inside retrieval
        (search/scope.py), so other sessions' transcripts cannot crowd a session's own out.
        """
        wanted = tuple(sources) if sources else None
        if "sessions" not in self.config.sources:
            return Scope(wanted)
        from mdrecall.sessions import transcripts_prefix

        policy = self.config.sessions
        shared = session_key is not None and any(marker in session_key for marker in policy.sharedKeyMarkers)
        if policy.visibility == "all" and not shared:
            return Scope(wanted)
        return Scope(wanted, transcripts_prefix(session_key or "", self.config))

    def _freshness(self, stale: bool) -> dict[str, Any]:
        """What a response knows about the index's freshness (as of ``checkedAt``)."""
        return {
            "stale": stale,
            "checkedAt": _iso(self._checked_at),
            "lastSyncAt": _iso(self._index_last_sync_at()),
            "filesOnDisk": self._last_freshness.get("filesOnDisk"),
            "filesIndexed": self._last_freshness.get("filesIndexed"),
            "pendingChanges": self._last_freshness.get("pendingChanges"),
            "deferredSessions": self._last_freshness.get("deferredSessions", 0),
            "dirty": self._dirty,
            "watcher": self._watcher_state(),
        }

    def _index_last_sync_at(self) -> float | None:
        """The last sync finished by any process on this index (this process's if newer)."""
        try:
            with self._read_mutex:
                raw = self._read_db.get_kv(LAST_SYNC_KEY)
            stored = float(raw) if raw else None
        except Exception:
            stored = None
        candidates = [t for t in (stored, self._last_sync_at) if t]
        return max(candidates) if candidates else None

    def _watcher_state(self) -> str:
        if self._watcher is None:
            return "failed" if self._watcher_error else "off"
        return "running" if self._watcher.running else "stopped"

    # -- background freshness: watcher and interval syncs -----------------------------------------
    @property
    def watcher(self) -> Any:
        """The attached :class:`mdrecall.watch.MemoryWatcher`, or None."""
        return self._watcher

    def _verify_index(self) -> None:
        """The full integrity check that opening skipped (it reads the whole file), off the caller's
        path. Damage it finds is handled like damage a search runs into: checked again, moved aside,
        rebuilt from the files."""
        try:
            # Read-write (it only reads): a read-only connection cannot replay the WAL a killed
            # writer left behind and would fail with ReadOnlyError on a healthy index.
            conn = apsw.Connection(str(self.db_path), flags=apsw.SQLITE_OPEN_READWRITE)
            conn.setbusytimeout(self._store_options.busy_timeout_ms)
        except apsw.Error as exc:
            self._integrity = f"not checked: {exc}"
            return
        self._verify_conn = conn
        try:
            if self._closed:
                return
            row = conn.execute("PRAGMA quick_check").fetchone()
            result = str(row[0]) if row else "no answer"
        except apsw.InterruptError:
            self._integrity = "interrupted"
            return
        except CORRUPTION_ERRORS as exc:
            result = f"{type(exc).__name__}: {exc}"
        except apsw.Error as exc:  # busy, I/O: not a verdict on the file
            self._integrity = f"not checked: {type(exc).__name__}: {exc}"
            return
        finally:
            self._verify_conn = None
            conn.close()
        self._integrity = "ok" if result == "ok" else f"failed: {result}"
        if result != "ok" and not self._closed:
            try:
                self._recover_in_use(StoreError(f"integrity check failed: {result}"), lock_held=False)
            except Exception as exc:
                log.warning("mdrecall: could not recover the index after a failed integrity check: %s", exc)

    def start_background(self) -> None:
        """Start what ``sync`` asks for: the file watcher (``watch``) and interval syncs
        (``intervalMinutes``), and the index's full integrity check. All stop in :meth:`close`.
        Called by :func:`open_manager`."""
        if self._verify_thread is None:
            self._verify_thread = threading.Thread(target=self._verify_index, name="mdrecall-verify-index", daemon=True)
            self._verify_thread.start()
        if self.config.sync.watch and self._watcher is None:
            try:
                from mdrecall.watch import attach_watcher

                self._watcher = attach_watcher(self)
                self._watcher_error = None
            except Exception as exc:  # missing watchfiles, inotify limits: searches still reconcile
                self._watcher_error = f"{type(exc).__name__}: {exc}"
                log.warning("mdrecall: file watcher not started (%s); searches still check the files", exc)
        if self._background_period() is not None and self._interval_thread is None:
            self._interval_thread = threading.Thread(target=self._interval_loop, name="mdrecall-interval-sync", daemon=True)
            self._interval_thread.start()

    def _background_period(self) -> float | None:
        """Seconds between background syncs: ``intervalMinutes``, and with a watcher its re-check."""
        periods = []
        if self.config.sync.intervalMinutes > 0:
            periods.append(self.config.sync.intervalMinutes * 60.0)
        if self._watcher is not None and self.config.sync.watchReconcileIntervalMs > 0:
            periods.append(self.config.sync.watchReconcileIntervalMs / 1000.0)
        return min(periods) if periods else None

    @property
    def interval_sync_running(self) -> bool:
        return self._interval_thread is not None and self._interval_thread.is_alive()

    def _interval_loop(self) -> None:
        period = self._background_period() or 60.0
        while not self._stop_background.wait(period):
            try:
                # Someone else syncing right now is as good as our own sync: do not queue behind it.
                self.sync(lock_timeout=1.0, defer_sessions=True)
            except Exception as exc:
                log.warning("mdrecall: background sync failed: %s", exc)

    # -- read ------------------------------------------------------------------------------------
    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        real, normalised = resolve_memory_path(self.workspace, self.config, rel_path)
        limits = self.config.read
        start = 1 if from_line is None else int(from_line)
        if start < 1:
            raise PathError("invalid_path", f"from must be ≥ 1 (got {from_line})")
        count = limits.maxLines if lines is None else max(1, min(int(lines), limits.maxLines))
        raw = real.read_bytes()
        if len(raw) > self.config.limits.maxFileBytes:
            raise PathError("invalid_path", f"{normalised} is larger than limits.maxFileBytes")
        content = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
        all_lines = content.split("\n")
        if all_lines and all_lines[-1] == "":
            all_lines.pop()
        selected = all_lines[start - 1 : start - 1 + count]
        text = "\n".join(selected)
        truncated = start - 1 + count < len(all_lines)
        if len(text) > limits.maxChars:
            kept: list[str] = []
            size = 0
            for line in selected:
                if size + len(line) + 1 > limits.maxChars:
                    break
                kept.append(line)
                size += len(line) + 1
            if not kept:  # one huge line: cut it
                kept = [selected[0][: limits.maxChars]]
            selected = kept
            text = "\n".join(kept)
            truncated = True
        result: dict[str, Any] = {
            "text": text,
            "path": normalised,
            "from": start,
            "lines": len(selected),
            "totalLines": len(all_lines),
        }
        if truncated:
            result["truncated"] = True
            result["nextFrom"] = start + len(selected)
        for listener in list(self._read_listeners):
            try:
                listener(normalised, start, len(selected), datetime.now(timezone.utc))
            except Exception:
                pass  # grounding signals must never break a read
        return result

    # -- status & probes -------------------------------------------------------------------------
    def status(self, deep: bool = False) -> dict[str, Any]:
        return self._recovering(self._status)

    def _status(self) -> dict[str, Any]:
        selection = self._selection_or_select()
        provider = selection.provider
        db = self._read_db
        with self._read_mutex:
            counts = db.counts()
            meta = db.read_meta()
            skipped = db.skipped()
            cache_entries = db.cache_size()
            vec_dims = db.vec_dims()
            indexed = db.files()
        files = sum(c["files"] for c in counts.values())
        chunks = sum(c["chunks"] for c in counts.values())
        # Always walk: "clean" must describe the files on disk now, not the last sync or event.
        generation = self._dirty_generation
        dirs, dirs_racy = scan_dirs(self.workspace, self.config)
        observed: dict[str, tuple[int, int, int]] = {}
        pending = self._pending_changes(indexed, skipped, observed)
        mismatch = self._stored_identity_mismatch(meta)
        self._checked_at = time.time()
        self._last_freshness = {
            "filesOnDisk": pending["filesOnDisk"],
            "filesIndexed": len(indexed),
            "pendingChanges": pending["count"],
            "deferredSessions": pending["deferredCount"],
        }
        if pending["count"] - pending["deferredCount"] == 0 and mismatch is None:
            self._snapshot = make_snapshot(dirs, dirs_racy, observed)
            if self._dirty_generation == generation:
                self._dirty = False
        if provider is None:
            mode = "keyword-only" if db.caps.fts_available else "file-scan"
        elif not db.caps.fts_available:
            mode = "vector-only"
        else:
            mode = "hybrid"
        status: dict[str, Any] = {
            "backend": self.backend,
            "workspaceDir": str(self.workspace),
            "dbPath": str(self.db_path),
            "files": files,
            "chunks": chunks,
            "sourceCounts": [{"source": s, **c} for s, c in sorted(counts.items())],
            "sources": list(self.config.sources),
            "extraPaths": list(self.config.extraPaths),
            "provider": provider.id if provider else "none",
            "model": provider.model if provider else "fts-only",
            "requestedProvider": selection.requested,
            "providerSelection": selection.to_dict(),
            "dims": provider.dims if provider else None,
            "searchMode": mode,
            "modeReasons": self._mode_reasons(selection),
            "fts": {"enabled": self.config.query.fts.enabled, "available": db.caps.fts_available, "error": db.caps.fts_error,
                    "tokenizer": self.config.query.fts.tokenizer},
            "vector": {
                "enabled": self.config.store.vector.enabled,
                "available": db.caps.vector_available,
                "backend": "sqlite-vec" if db.caps.vector_available and vec_dims else ("in-process" if provider else None),
                "loadError": db.caps.vector_error,
                "version": db.caps.vec_version,
                "dims": vec_dims,
                # The in-memory copy of the vectors that answers KNN while it fits the budget.
                "memoryCache": {
                    "maxMiB": self.config.store.vector.memoryCacheMiB,
                    "loadedVectors": self._vectors.loaded_vectors,
                    "loadedMiB": round(self._vectors.loaded_bytes / 2**20, 1),
                },
            },
            "cache": {"enabled": self.config.cache.enabled, "entries": cache_entries, "maxEntries": self.config.cache.maxEntries},
            "fallback": {"from": selection.fallback_from, "reason": selection.fallback_reason} if selection.fallback_from else None,
            # Remote providers: the last failed call (retried or not) and the OpenAI Batch API state.
            "providerError": getattr(provider, "last_error", None),
            "batch": provider.batch_api.status() if getattr(provider, "batch_api", None) is not None else {"enabled": False},
            "skipped": [{"path": p, "source": v[0], "reason": v[1]} for p, v in sorted(skipped.items())],
            "meta": meta,
            "dirty": self._dirty or bool(pending["count"]),
            "pendingChanges": pending if pending["count"] else {},
            "rebuildNeeded": mismatch,
            "clean": not pending["count"] and mismatch is None,
            "freshness": self._freshness(stale=bool(pending["count"] - pending["deferredCount"]) or mismatch is not None),
            "lastSyncAt": _iso(self._index_last_sync_at()),
            "lastError": self._last_error,
            "migration": dict(self._migration) if self._migration else None,
            "recovered": self._recovered,
            "integrityCheck": self._integrity,
            "lastSync": self._last_report.to_dict() if self._last_report else None,
            "watcher": self._watcher.status() if self._watcher is not None else (
                {"running": False, "error": self._watcher_error} if self._watcher_error else None
            ),
            # Recall tracking for promotion (dreaming), recorded on a background thread.
            "recallTracking": self.recall_writer.status() if self.recall_writer is not None else None,
            "intervalSync": {"minutes": self.config.sync.intervalMinutes, "running": self.interval_sync_running,
                             "periodSeconds": self._background_period()},
        }
        return status

    def _mode_reasons(self, selection: ProviderSelection) -> list[str]:
        reasons = []
        db = self._read_db
        if selection.provider is None:
            reasons.append(f"no embedding provider: {selection.unavailable_reason}")
        elif not db.caps.vector_available:
            reasons.append(f"sqlite-vec not loaded ({db.caps.vector_error}); vectors are searched in process")
        if not db.caps.fts_available:
            reasons.append(f"FTS5 not available ({db.caps.fts_error}); keyword search scans stored chunks")
        return reasons

    def _pending_changes(
        self, indexed: dict[str, Any], skipped: dict[str, Any], observed: dict[str, tuple[int, int, int]] | None = None
    ) -> dict[str, Any]:
        """Walk the files (mtime+size) and compare with the index: what a full sync would do now.

        Counts memory files and transcripts: new, changed (including skipped files that changed),
        deleted (indexed or skipped files that are gone). ``deferred`` lists transcripts whose only
        change is an append below the delta thresholds (automatic syncs leave those for later; they
        still count as pending, so ``clean`` stays honest).
        """
        on_disk: dict[str, tuple[int, int, str, str]] = {}
        files = discover_memory_files(self.workspace, self.config) if "memory" in self.config.sources else []
        for adapter in self.extra_sources:
            files.extend(adapter.discover())
        for f in files:
            try:
                st = os.stat(f.abspath)
            except OSError:
                continue
            on_disk[f.rel_path] = (st.st_mtime_ns, st.st_size, f.abspath, f.source)
            if observed is not None:
                observed[f.abspath] = (st.st_mtime_ns, st.st_size, time.time_ns())
        new: list[str] = []
        changed: list[str] = []
        deferred: list[str] = []
        for p, (m, size, path, source) in on_disk.items():
            row = indexed.get(p)
            if row is not None:
                if row.mtime == m and row.size == size and row.source == source:
                    continue
                changed.append(p)
                adapter = next((a for a in self.extra_sources if a.source == source), None)
                deferrable = getattr(adapter, "deferrable", None)
                if row.source == source and deferrable is not None and deferrable(Path(path), row.size, size):
                    deferred.append(p)
            elif p in skipped:
                if (skipped[p][2], skipped[p][3]) != (m, size):
                    changed.append(p)
            else:
                new.append(p)
        deleted = [p for p in indexed if p not in on_disk] + [p for p in skipped if p not in on_disk]
        total = len(new) + len(changed) + len(deleted)
        return {"new": sorted(new)[:50], "changed": sorted(changed)[:50], "deleted": sorted(deleted)[:50],
                "deferred": sorted(deferred)[:50], "deferredCount": len(deferred), "count": total,
                "filesOnDisk": len(on_disk), "filesIndexed": len(indexed)}

    def probe_embedding_availability(self) -> ProbeResult:
        selection = self._selection_or_select()
        provider = selection.provider
        if provider is None:
            return ProbeResult(False, selection.unavailable_reason or "no embedding provider (keyword-only mode)")
        try:
            vec = provider.embed_query("ping")
        except Exception as exc:
            return ProbeResult(False, f"{type(exc).__name__}: {exc}", provider.id, provider.model)
        return ProbeResult(True, None, provider.id, provider.model, len(vec))

    def probe_vector_availability(self) -> bool:
        if not self.config.store.vector.enabled:
            return False
        if self._selection_or_select().provider is None:
            return False
        return self._read_db.caps.vector_available

    # -- asyncio ---------------------------------------------------------------------------------
    async def asearch(self, query: str, **kwargs: Any) -> SearchResponse:
        return await asyncio.to_thread(self.search, query, **kwargs)

    async def aread_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.read_file, rel_path, from_line, lines)

    async def async_sync(self, force: bool = False, progress: ProgressCallback | None = None) -> SyncReport:
        return await asyncio.to_thread(self.sync, force, progress)

    async def astatus(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.status)


def open_manager(
    workspace: str | os.PathLike[str],
    config: Mapping[str, Any] | MemoryConfig | None = None,
    *,
    use_global_config: bool = True,
) -> MemorySearchManager:
    """Open the memory of one workspace. ``config`` is the YAML memory-section mapping (merged over
    the config files) or a ready ``MemoryConfig``."""
    root = Path(workspace).expanduser()
    if not root.is_dir():
        raise MdrecallError(f"workspace {root} is not a directory")
    root = Path(os.path.abspath(root))
    cfg = config if isinstance(config, MemoryConfig) else load_config(root, config, use_global=use_global_config)
    if cfg.backend != "builtin":
        from mdrecall.backends import get_backend_factory

        return get_backend_factory(cfg.backend)(root, cfg)
    manager = BuiltinMemoryManager(root, cfg)
    _install_features(manager)
    manager.start_background()
    return manager


def _install_features(manager: BuiltinMemoryManager) -> None:
    """Optional features that hook into every search (recall tracking for promotion)."""
    try:
        from mdrecall.dreaming import install_recall_tracking
    except ImportError:
        return
    install_recall_tracking(manager)
