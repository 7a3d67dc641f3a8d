"""The builtin MemorySearchManager: the SQLite index of a workspace's Markdown, kept fresh, searched.

A facade over the parts that do the work:

* :mod:`mdrecall.index.recovery` — the read connection, opened with a cheap probe, rebuilt from the
  files when damaged; :mod:`mdrecall.index.syncing` — one sync or rebuild under the writer lock;
* :mod:`mdrecall.freshness.monitor` — when a search must re-check the files, the watcher and
  interval syncs; :mod:`mdrecall.builtin.provider` — the embedding provider and its fallback;
* :mod:`mdrecall.search.pipeline` — retrieval, fusion and citations; :mod:`mdrecall.builtin.status`.

Threading: searches read through one connection, syncs write through another (WAL lets both run at
once). Across processes one writer at a time holds ``<db>.lock``; a search never waits for another
sync longer than ``sync.searchWaitMs`` and says so when it answers from an index it could not refresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from mdrecall.builtin.provider import ProviderState
from mdrecall.config import MemoryConfig
from mdrecall.contract import ManagerBase
from mdrecall.crashpoints import crash_point
from mdrecall.embeddings.base import EmbeddingProvider
from mdrecall.errors import EmbeddingError, MdrecallError
from mdrecall.freshness.monitor import (
    BUSY_OTHER_PROCESS,
    BUSY_OTHER_THREAD,
    MAY_MISS,
    READ_ONLY,
    Comparison,
    FreshnessMonitor,
)
from mdrecall.freshness.snapshot import DIRS_KEY, Delta, Snapshot, scan_dirs, stored_snapshot
from mdrecall.freshness.watcher import MemoryWatcher
from mdrecall.gcpause import deferred_collection
from mdrecall.index.changes import UNREADABLE, Observed, pending_changes
from mdrecall.index.identity import EMBEDDING_KEYS, identity_mismatch
from mdrecall.index.recovery import IndexHandle
from mdrecall.index.syncing import LAST_SYNC_KEY, IndexSyncer, SyncRun
from mdrecall.search.ahead import QueryEmbedding
from mdrecall.search.ann import ApproximateVectors
from mdrecall.search.ann import available as ann_available
from mdrecall.search.asof import search_times
from mdrecall.search.dating import times_for
from mdrecall.search.filelines import files_unchanged, lengths_for
from mdrecall.search.filescan import merge_hits, scan_unindexed
from mdrecall.search.keyword import Candidate
from mdrecall.search.pipeline import NOTHING_RELEVANT, SearchPlan, VectorSearch, run_search, vector_skip_reason
from mdrecall.search.scope import ScopeLike, scope_for
from mdrecall.search.vector import InProcessVectors, stored_vector_search
from mdrecall.sources.base import SourceAdapter
from mdrecall.sources.reading import read_memory_lines
from mdrecall.sources.sessions import SessionSource
from mdrecall.store import WriterLock, default_store_path
from mdrecall.store.db import IndexDB, StoreOptions
from mdrecall.types import ProbeResult, ProgressCallback, ReadResult, SearchRequest, SearchResponse, Status, SyncReport

#: How long ``close()`` waits for a sync running in another thread to stop at its next file.
CLOSE_WAIT_S = 10.0

if TYPE_CHECKING:
    import numpy as np


class BuiltinMemoryManager(ManagerBase):
    backend = "builtin"

    def __init__(self, workspace: Path, config: MemoryConfig, *, store_options: StoreOptions | None = None) -> None:
        super().__init__(workspace, config)
        self.db_path = Path(config.store.path).expanduser() if config.store.path else default_store_path(workspace)
        options = store_options or StoreOptions()
        options.fts_enabled = config.query.fts.enabled
        options.fts_tokenizer = config.query.fts.tokenizer
        options.vector_enabled = config.store.vector.enabled
        options.vector_extension_path = config.store.vector.extensionPath
        options.busy_timeout_ms, options.cache_mib = config.store.busyTimeoutMs, config.store.cacheMiB
        self.store_options = options
        self.providers = ProviderState(config)
        self.extra_sources: list[SourceAdapter] = [SessionSource(workspace, config)] if "sessions" in config.sources else []
        self.monitor = FreshnessMonitor(self)
        self._lock = WriterLock(self.db_path)
        self._sync_mutex = threading.RLock()
        self._syncer = IndexSyncer(workspace, config, self.db_path, options, self.extra_sources, lengths_for(workspace).prime)
        self.vectors = InProcessVectors(max_bytes=config.store.vector.memoryCacheMiB * 2**20)
        #: Past the memory budget: the approximate index beside the file (search/ann.py), if on.
        self.ann = ApproximateVectors(self.db_path, options) if config.store.vector.approximate == "auto" else None
        self.last_sync_at: float | None = None
        self.last_error: str | None = None
        self.last_report: SyncReport | None = None
        self._closed = False
        self.index = IndexHandle(self.db_path, options, self._lock, on_recovered=self.monitor.invalidate)

    # -- lifecycle --------------------------------------------------------------------------------
    def start_background(self) -> None:
        """Start the index's full integrity check, the watcher and interval syncs (stopped by close)."""
        self.index.start_verify(*self.monitor.first_search_hold())
        self.monitor.start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A sync still running in another thread (an MCP server's first index) stops at its next
        # file, keeping every file it finished, instead of holding the close for the whole index.
        self._syncer.cancel.set()
        if self._sync_mutex.acquire(timeout=CLOSE_WAIT_S):
            self._sync_mutex.release()
        self._run_close_hooks()  # background writers (recall tracking) drain first
        self.monitor.stop()
        if self.ann is not None:
            self.ann.close()
        self.index.close()
        self.providers.close()

    @property
    def provider(self) -> EmbeddingProvider | None:
        return self.providers.provider

    @property
    def watcher(self) -> MemoryWatcher | None:
        return self.monitor.watcher

    @property
    def migration(self) -> dict[str, object] | None:
        return self._syncer.migration

    # -- sync -------------------------------------------------------------------------------------
    def mark_dirty(self, paths: Sequence[str] | None = None) -> None:
        self.monitor.mark_dirty(look_at_all=True)

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
        return self._sync(force, progress, lock_timeout, defer_sessions, None)

    def sync_since(self, base: Snapshot, delta: Delta | None = None, *, lock_timeout: float | None, defer_sessions: bool) -> SyncReport:
        """An automatic sync that looks only at what moved since ``base``, a snapshot of the files
        taken when the index last matched them (``delta``: what moved, when the caller already
        looked), where it can (index/scope.py); else a full one."""
        return self._sync(False, None, lock_timeout, defer_sessions, (base, delta))

    def _sync(self, force: bool, progress: ProgressCallback | None, lock_timeout: float | None, defer_sessions: bool,
              base: tuple[Snapshot, Delta | None] | None) -> SyncReport:  # fmt: skip
        if self.config.store.readOnly:
            return SyncReport(rebuild_reason=READ_ONLY)
        deadline = None if lock_timeout is None else time.monotonic() + max(0.0, lock_timeout)
        if not self._sync_mutex.acquire(timeout=-1 if lock_timeout is None else max(0.0, lock_timeout)):
            return SyncReport(rebuild_reason=BUSY_OTHER_THREAD)
        try:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._lock.acquire(remaining):
                return SyncReport(rebuild_reason=BUSY_OTHER_PROCESS)
            try:
                crash_point("sync:locked")
                return self._sync_locked(force, progress, defer_sessions, base)
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                self._lock.release()
        finally:
            self._sync_mutex.release()

    def run_sync(self, *, lock_timeout: float | None, defer_sessions: bool) -> SyncReport:
        return self.sync(lock_timeout=lock_timeout, defer_sessions=defer_sessions)

    def _sync_locked(self, force: bool, progress: ProgressCallback | None, defer_sessions: bool,
                     base: tuple[Snapshot, Delta | None] | None) -> SyncReport:  # fmt: skip
        generation = self.monitor.generation
        # When the files were looked at: a delta the caller took before this sync is older.
        started = min(time.monotonic(), base[1].started) if base is not None and base[1] is not None else time.monotonic()

        def attempt() -> SyncRun:
            self.providers.resolve_dims()
            return self._syncer.run(
                self.providers.provider,
                self.providers.key,
                self.providers.desired_meta(self.workspace),
                force=force,
                progress=progress,
                defer_sessions=defer_sessions,
                base=base,
            )

        try:
            run = self.index.recovering(attempt, lock_held=True)
        except EmbeddingError as exc:
            if not self.providers.switch_to_fallback(exc):
                raise
            run = self.index.recovering(attempt, lock_held=True)  # new provider identity: a full rebuild
        self.monitor.synced(run, run.dirs, generation, self._indexed_count(), started)
        self._refresh_approximate()
        self.last_sync_at = time.time()
        self.last_error = None
        self.last_report = run.report
        return run.report

    def _refresh_approximate(self) -> None:
        """Past the memory budget, bring the approximate index up to date in the background, so the
        next searches use it instead of scanning (search/ann.py)."""
        if self.ann is None or not ann_available():
            return
        with self.index.reading() as db:
            dims = db.vec_dims()
            past_budget = bool(dims) and db.vector_encoding() != "float32" and not self.vectors.fits(db, dims)
        if past_budget:
            self.ann.update_in_background()

    def compare_with_files(self) -> Comparison:
        """The files on disk against the index, without a lock (what a full sync would do now)."""
        started = time.monotonic()
        dirs, dirs_racy = scan_dirs(self.workspace, self.config)  # before the files are listed
        with self.index.reading() as db:
            indexed, skipped, meta = db.files(), db.skipped(), db.read_meta()
        observed: dict[str, Observed] = {}
        pending = pending_changes(self.workspace, self.config, self.extra_sources, indexed, skipped, observed)
        return Comparison(pending, self.stored_identity_mismatch(meta), meta is not None, dirs, dirs_racy, observed, started)

    def indexed_file_count(self) -> int:
        """How many files the index holds (the freshness monitor sizes its watcher's start by it)."""
        with self.index.reading() as db:
            return db.file_count()

    def stored_snapshot(self) -> Snapshot | None:
        """The last complete sync's view of the files, from the index (freshness/snapshot.py), or
        None when there is none or the index does not fit the configuration."""
        with self.index.reading() as db:
            meta = db.read_meta()
            if meta is None or self.stored_identity_mismatch(meta) is not None:
                return None
            record = db.get_kv(DIRS_KEY)
            if not record:
                return None
            prefix = str(self.workspace) + "/"
            rows, unreadable, version = db.file_stats(prefix), db.skipped_paths(prefix, UNREADABLE), db.chunks_version()
        return stored_snapshot(self.workspace, record, rows, unreadable, version)

    def stored_identity_mismatch(self, meta: dict[str, object] | None) -> str | None:
        """Why the stored index does not fit the configuration, or None (unknown dims are not one).
        Keyword-only over a read-only index reads whatever vectors it holds: only the text must fit."""
        desired = self.providers.desired_meta(self.workspace)
        if self.config.store.readOnly and self.providers.provider is None:
            desired = {k: v for k, v in desired.items() if k not in EMBEDDING_KEYS}
        return identity_mismatch(meta, desired, ignore_unknown=True)

    def _indexed_count(self) -> int:
        with self.index.reading() as db:
            return db.file_count()

    def index_last_sync_at(self) -> float | None:
        """The last sync finished by any process on this index (this process's if newer)."""
        try:
            with self.index.reading() as db:
                raw = db.get_kv(LAST_SYNC_KEY)
            stored = float(raw) if raw else None
        except Exception:
            stored = None
        candidates = [t for t in (stored, self.last_sync_at) if t]
        return max(candidates) if candidates else None

    # -- search -----------------------------------------------------------------------------------
    def run_search(self, request: SearchRequest) -> SearchResponse:
        if self._closed:
            raise MdrecallError("manager is closed")
        try:
            with deferred_collection():
                return self.index.recovering(lambda: self._search(request))
        finally:
            self.monitor.attach_now()  # a large tree's watcher waits for the first search to end

    def _search(self, request: SearchRequest) -> SearchResponse:
        query, max_results, min_score, session_key, sources = (
            request.query, request.max_results, request.min_score, request.session_key, request.sources
        )
        now, as_of = search_times(request.now, request.as_of)
        selection = self.providers.selection
        provider = selection.provider
        text = (query or "").strip()
        # The query's embedding starts now, beside the freshness check and the keyword side
        # (search/ahead.py); unused where the vector side turns out paused.
        started = (QueryEmbedding(provider.embed_query, text)
                   if provider is not None and text and vector_skip_reason(self.config, text, provider.languages) is None
                   else None)  # fmt: skip
        replacements = self.index.replacements
        stale, notes = self.monitor.before_search(session_key)
        recovery = self.index.take_recovery_note()
        if recovery:
            notes.append(recovery)
        building = self._syncer.migration
        if building is not None:
            done, total = building.get("completed", 0), building.get("total", 0)
            what = "first index" if building.get("from") is None else "rebuild"
            notes.append(f"{what} in progress ({done} of {total} {building.get('label', '')}); results may be incomplete"
                         if total else f"{what} in progress; results may be incomplete")  # fmt: skip
        configured = list(self.config.sources)
        wanted = [s for s in sources if s in configured] if sources else configured
        response = SearchResponse(
            results=[],
            mode="keyword-only" if provider is None else "hybrid",
            provider=provider.id if provider else "none",
            model=provider.model if provider else "fts-only",
            stale=stale,
            freshness=self.monitor.freshness(stale),
            warnings=notes,
        )
        if not text or not wanted:
            return response

        degraded: list[str] = []
        if provider is None and self.config.provider != "none":  # provider: none is keyword-only by choice
            degraded.append(f"keyword-only: {selection.unavailable_reason}")
        scope = scope_for(self.config, None if set(wanted) == set(configured) else wanted, session_key)
        plan = SearchPlan(
            query=text,
            max_results=max_results or self.config.query.maxResults,
            min_score=self.config.query.minScore if min_score is None else min_score,
            scope=scope,
            now=now,
            line_lengths=lengths_for(self.workspace),
            as_of=as_of,
            times=times_for(self.workspace),
        )
        with self.index.reading() as db:
            if self.index.replacements != replacements:  # recovered since the freshness check: a fresh index
                response.stale = stale = True
                response.warnings.append("the index was rebuilt from the files during this search; results may be incomplete")
            if "sessions" in wanted and scope.transcripts_prefix == "" and db.has_source("sessions"):
                response.warnings.append(
                    "session transcripts are indexed but hidden from a search without a session key "
                    "(sessions.visibility: own): pass one (--session-key, MDRECALL_SESSION_KEY, "
                    "mcp.sessionKey) or set sessions.visibility: all"
                )
            embed = None
            vector_fn: VectorSearch | None = None
            stored = db.read_meta()
            if provider is not None and stored is not None and stored.get("providerKey") != self.providers.key:
                # The index holds another model's vectors (a rebuild is pending or running): comparing
                # them with this model's query vector would return wrong results. Keywords until then.
                degraded.append(
                    f"vector search paused: the index was built with {stored.get('provider')}/{stored.get('model')}; "
                    f"it resumes when the rebuild for {provider.id}/{provider.model} finishes"
                )
            elif provider is not None:
                embed = provider.embed_query
                vector_fn, note = self._vector_search_fn(db)
                if note:
                    degraded.append(note)
            if not db.caps.fts_available:
                degraded.append(f"no keyword index: {db.caps.fts_error}")
            with files_unchanged(self.monitor.unchanged_token()):  # files the caches checked under it: no stat
                outcome = run_search(db, self.config, plan, embed, vector_fn, degraded, provider.languages if provider else None,
                                     started=started)  # fmt: skip
            unindexed, deleted = self.monitor.unindexed() if stale and "memory" in wanted else ([], [])
            indexed = {path: row.hash for path, row in db.files().items()} if unindexed else {}
        if stale and not response.freshness.stale:  # the rebuild above, once the index is free again
            response.freshness = self.monitor.freshness(True)
        response.results = outcome.results
        response.mode = outcome.mode
        response.degraded = outcome.degraded
        response.warnings.extend(outcome.warnings)
        response.reason = outcome.reason
        if unindexed or deleted:
            self._add_unindexed(response, plan, unindexed, deleted, indexed)
        self._notify_search(text, response, session_key, now)
        return response

    def _add_unindexed(self, response: SearchResponse, plan: SearchPlan, unindexed: list[str], deleted: list[str],
                       indexed: dict[str, str]) -> None:  # fmt: skip
        """An answer the index could not be refreshed for: the memory files it does not hold yet, read
        directly (search/filescan.py), merged in; hits of files changed or deleted since, left out."""
        scan = scan_unindexed(self.workspace, self.config, unindexed, plan, indexed)
        replaced = set(deleted) | scan.read
        response.results = merge_hits(response.results, scan.hits, replaced, plan.max_results, self.config.query.maxInjectedChars)
        if scan.read or scan.left:
            response.warnings[:] = [w.replace(MAY_MISS, "read directly instead") if not scan.left else w
                                    for w in response.warnings]  # fmt: skip
            response.warnings.append(scan.note())
        if response.results:
            response.reason = None
            response.warnings[:] = [w for w in response.warnings if not w.startswith(f"{NOTHING_RELEVANT}:")]
            if unindexed and not indexed:  # nothing indexed yet: every hit came from the files themselves
                response.mode = "file-scan"
        elif scan.candidates:
            response.reason = NOTHING_RELEVANT

    def _vector_search_fn(self, db: IndexDB) -> tuple[VectorSearch, str | None]:
        """The KNN for the next search, and why it is degraded (None when it is not): the in-memory
        matrix while it fits ``store.vector.memoryCacheMiB`` (same ranking, ~40× faster), else a
        scan of the stored vectors (sqlite-vec for float32 files, NumPy for float16 ones). A float32
        file without sqlite-vec keeps the matrix whatever its size."""
        float32 = db.vector_encoding() == "float32"
        if float32 and not db.caps.vector_available:
            return self.vectors.search, f"vectors searched in process: {db.caps.vector_error}"
        vec_dims = db.vec_dims()
        if vec_dims is None:  # nothing embedded yet (an empty or first index): nothing is degraded
            return self.vectors.search, None
        if self.vectors.fits(db, vec_dims):
            return self.vectors.search, None
        ann = self.ann
        if ann is None or float32 or not ann_available():
            return stored_vector_search, None

        def approximate(db: IndexDB, query_vec: np.ndarray, limit: int, scope: ScopeLike) -> list[Candidate]:
            found = ann.search(db, query_vec, limit, scope)  # None: not up to date yet (being updated)
            return stored_vector_search(db, query_vec, limit, scope) if found is None else found

        return approximate, None

    # -- read, status, probes ---------------------------------------------------------------------
    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        result = read_memory_lines(self.workspace, self.config, rel_path, from_line, lines)
        self._notify_read(result.path, result.from_line, result.lines, datetime.now(UTC))
        return result

    def status(self) -> Status:
        from mdrecall.builtin.status import build_status

        return self.index.recovering(lambda: build_status(self))

    def probe_embedding_availability(self) -> ProbeResult:
        selection = self.providers.selection
        provider = selection.provider
        if provider is None:
            return ProbeResult(False, selection.unavailable_reason or "no embedding provider (keyword-only mode)")
        try:
            vec = provider.embed_query("ping")
        except Exception as exc:
            return ProbeResult(False, f"{type(exc).__name__}: {exc}", provider.id, provider.model)
        return ProbeResult(True, None, provider.id, provider.model, len(vec))

    def probe_vector_availability(self) -> bool:
        if not self.config.store.vector.enabled or self.providers.provider is None:
            return False
        with self.index.reading() as db:
            return db.caps.vector_available
