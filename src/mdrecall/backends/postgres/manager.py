"""``PostgresMemoryManager``: the ``MemorySearchManager`` contract over the team store.

This module is the one place that maps the backend onto the contract (SearchResponse, ReadResult,
Status, SyncReport); store.py, search.py and schema.py know nothing of it.

* Sync: the builtin's ``Indexer`` (discovery, chunking, transcripts, the embedding cache, hash-based
  incremental writes) runs against ``PgStore`` under this agent's advisory lock; the indexer hands the
  store the text each file was chunked from, which decides the file's visibility. A rebuild (forced,
  or the index identity changed) runs in one transaction: other connections see the old rows until
  it commits, as the builtin's rebuild-and-swap does.
* Freshness: the builtin's ``FreshnessMonitor`` decides when a search re-checks the files (and runs
  the watcher and interval syncs), so ``sync.*`` means the same for both engines.
* Search: one SQL round trip for both candidate lists, then the builtin's ranking
  (``rank_candidates``). Other agents' team files come back as ``@agent/path``.
* read_file: this agent's own paths are read from its workspace exactly as the builtin does (path
  checks included); ``@agent/path`` is served from the store's copy of a team file, which the database
  only returns when that file is visible to this agent's role. A private or missing file gives the
  same ``not_found``, so a crafted path cannot even learn that a private file exists.
* Faults of the server (store.py, faults.py) reach callers as one-line ``PgFault``s; a sync's says what
  was kept (each file is its own transaction, a rebuild one transaction) and what to do next.
* Embedding identity: the team's vectors must come from one model (agents compare their queries with
  each other's vectors); the first agent to sync with vectors fixes it in the store, and an agent
  configured otherwise gets a clear error on sync and keyword-only answers on search.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import numpy as np

from mdrecall.backends.postgres.corpus import PgCorpus, PgStats
from mdrecall.backends.postgres.faults import PgFault
from mdrecall.backends.postgres.schema import LATEST
from mdrecall.backends.postgres.search import retrieve
from mdrecall.backends.postgres.settings import PostgresSettings, connection_settings
from mdrecall.backends.postgres.store import TEAM_IDENTITY_KEY, PgStore
from mdrecall.builtin.provider import ProviderState
from mdrecall.config import MemoryConfig
from mdrecall.contract import ManagerBase
from mdrecall.errors import MdrecallError, PathError, StoreError
from mdrecall.freshness.monitor import BUSY_OTHER_PROCESS, BUSY_OTHER_THREAD, READ_ONLY, Comparison, FreshnessMonitor
from mdrecall.freshness.snapshot import scan_dirs
from mdrecall.index.changes import Observed, pending_changes
from mdrecall.index.chunking import ResumableChunker
from mdrecall.index.identity import EMBEDDING_KEYS, identity_mismatch
from mdrecall.index.indexer import Indexer, SyncContext
from mdrecall.index.syncing import LAST_SYNC_KEY, SyncRun
from mdrecall.search.asof import search_times
from mdrecall.search.dating import times_for
from mdrecall.search.filelines import files_unchanged, lengths_for
from mdrecall.search.pipeline import SearchOutcome, SearchPlan, candidate_limit, rank_candidates, vector_skip_reason
from mdrecall.search.scope import scope_for
from mdrecall.sources.base import SourceAdapter
from mdrecall.sources.reading import read_memory_lines, window_lines
from mdrecall.sources.sessions import SessionSource
from mdrecall.sources.workspace import MAX_PATH_CHARS
from mdrecall.types import (
    ProbeResult,
    ProgressCallback,
    ReadResult,
    SearchMode,
    SearchRequest,
    SearchResponse,
    Status,
    SyncReport,
)

#: What to do after a sync stopped on each kind of fault (PgFault.kind).
_NEXT = {
    "unreachable": "run `mdrecall index` again once the server is back",
    "lost": "run `mdrecall index` again once the server is back",
    "timeout": "run `mdrecall index` again (or raise postgres.statementTimeoutMs)",
    "disk_full": "free space on the server, then run `mdrecall index`",
    "read_only": "sync against the primary (postgres.dsn) or once the store takes writes again",
}


#: What a sync stopped at each stage leaves in the store.
_KEPT = {
    "before": "Nothing was written",
    "files": "Nothing half-written: every file synced before it is kept, whole",
    "rebuild": "Nothing half-written: the rebuild was rolled back, the old rows still answer",
}


class SyncStopped(PgFault):
    """A sync ended by a fault of the server; the message says what was kept and what to do next."""

    def __init__(self, fault: PgFault, stage: Literal["before", "files", "rebuild"]) -> None:
        super().__init__(fault.kind, f"sync stopped: {fault}. {_KEPT[stage]}; "
                                     f"{_NEXT.get(fault.kind, 'run `mdrecall index` again')}")


def parse_team_path(rel_path: str) -> tuple[str, str] | None:
    """``@agent/path`` -> (agent, normalised path); None for a plain (own workspace) path."""
    if not isinstance(rel_path, str) or not rel_path.startswith("@"):
        return None
    if "\x00" in rel_path or "\\" in rel_path or len(rel_path) > MAX_PATH_CHARS:
        raise PathError("invalid_path", f"invalid team memory path {rel_path!r}")
    agent, _, rest = rel_path[1:].partition("/")
    parts = PurePosixPath(rest).parts
    if not agent or not rest or rest.startswith("/") or any(p in ("..", ".") for p in rest.split("/")) or not parts:
        raise PathError("invalid_path", f"{rel_path!r}: a team memory path is @agent/relative/path.md")
    if not rest.endswith(".md"):
        raise PathError("not_memory_path", f"{rel_path!r} is not a Markdown (.md) memory file")
    return agent, "/".join(parts)


class PostgresMemoryManager(ManagerBase):
    backend = "postgres"

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        super().__init__(workspace, config)
        self.settings: PostgresSettings = connection_settings(config)
        self.store = PgStore(self.settings, application_name=f"mdrecall:{self.settings.agentId or 'agent'}")
        self.agent_id = self.store.identity.agent_id
        self.team_id = self.store.identity.team_id
        self.providers = ProviderState(config)
        self.extra_sources: list[SourceAdapter] = [SessionSource(workspace, config)] if "sessions" in config.sources else []
        #: Transcripts grow by appends: each sync chunks one from where it changed (index/chunking.py).
        self._chunker = ResumableChunker()
        self.monitor = FreshnessMonitor(self)
        self._sync_mutex = threading.RLock()
        self._team_identity_seen: dict[str, Any] | None = None
        self.last_sync_at: float | None = None
        self.last_error: str | None = None
        self.last_report: SyncReport | None = None
        self._corpus_stats = PgStats()  # corpus size and mean vector for scoring (corpus.py)
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------
    def start_background(self) -> None:
        """Start the watcher and interval syncs that ``sync.*`` asks for (stopped by close)."""
        self.monitor.start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._run_close_hooks()  # background writers (recall tracking) drain first
        self.monitor.stop()
        self.store.close()
        self.providers.close()

    # -- identity --------------------------------------------------------------------------------
    def desired_meta(self) -> dict[str, Any]:
        """The meta row this agent's rows should carry: the builtin's identity (model, chunking,
        sources, roots, keyword text) plus what decides visibility and keyword stemming here."""
        meta = self.providers.desired_meta(self.workspace)
        meta.update(
            schemaVersion=LATEST,
            sharedFolders=list(self.settings.sharedFolders),
            textSearchConfig=self.settings.textSearchConfig,
        )
        return meta

    def team_identity(self) -> dict[str, Any] | None:
        """The embedding model the team's vectors come from (None: no agent stored vectors yet)."""
        if self._team_identity_seen is not None:
            return self._team_identity_seen  # first writer wins: once set, it never changes
        raw = self.store.get_kv(TEAM_IDENTITY_KEY, team=True)
        value = json.loads(raw) if raw else None
        self._team_identity_seen = value if isinstance(value, dict) else None
        return self._team_identity_seen

    def _vectors_match_team(self) -> bool:
        team = self.team_identity()
        return team is None or team.get("providerKey") == self.providers.key

    def _vector_identity(self) -> dict[str, Any] | None:
        provider = self.providers.provider
        if provider is None:
            return None
        return {"provider": provider.id, "model": provider.model, "providerKey": self.providers.key, "dims": provider.dims}

    # -- sync ------------------------------------------------------------------------------------
    def sync(self, force: bool = False, progress: ProgressCallback | None = None, *,
             lock_timeout: float | None = None, defer_sessions: bool = False) -> SyncReport:
        """Bring this agent's rows up to date with its files. One sync per agent at a time across every
        process and machine (a Postgres advisory lock); after ``lock_timeout`` seconds (default
        ``postgres.lockTimeoutMs``) a busy report (``rebuild_reason``) instead of waiting on."""
        if self._closed:
            raise MdrecallError("manager is closed")
        if self.config.store.readOnly:
            return SyncReport(rebuild_reason=READ_ONLY)
        timeout = self.settings.lockTimeoutMs / 1000.0 if lock_timeout is None else max(0.0, lock_timeout)
        deadline = time.monotonic() + timeout
        if not self._sync_mutex.acquire(timeout=timeout):
            return SyncReport(rebuild_reason=BUSY_OTHER_THREAD)
        try:
            with self.store.agent_lock(max(0.0, deadline - time.monotonic())) as got:
                if not got:
                    return SyncReport(rebuild_reason=BUSY_OTHER_PROCESS)
                report = self._sync_locked(force, progress, defer_sessions)
        except SyncStopped as stopped:
            self.last_error = str(stopped)
            raise
        except PgFault as fault:  # before any write: taking the lock, reading what is stored
            before = SyncStopped(fault, "before")
            self.last_error = str(before)
            raise before from fault
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._sync_mutex.release()
        self.last_error = None
        self.last_report = report
        if report.chunks_written or report.files_removed:
            self._corpus_stats.clear()
        self.last_sync_at = time.time()
        return report

    def run_sync(self, *, lock_timeout: float | None, defer_sessions: bool) -> SyncReport:
        return self.sync(lock_timeout=lock_timeout, defer_sessions=defer_sessions)

    def _claim_team_identity(self) -> None:
        wanted = self._vector_identity()
        if wanted is None:
            return
        in_force = json.loads(self.store.claim_team_kv(TEAM_IDENTITY_KEY, json.dumps(wanted, sort_keys=True)))
        self._team_identity_seen = in_force
        if in_force.get("providerKey") != wanted["providerKey"]:
            raise StoreError(
                f"team {self.team_id!r} stores vectors of {in_force.get('provider')}/{in_force.get('model')}; "
                f"this agent is configured for {wanted['provider']}/{wanted['model']}. Every agent of a team "
                "must use the same embedding model (or provider: none for keywords only)"
            )
        if wanted["dims"]:
            self.store.ensure_vec_table(int(wanted["dims"]))

    def _sync_locked(self, force: bool, progress: ProgressCallback | None, defer_sessions: bool) -> SyncReport:
        generation = self.monitor.generation
        self.store.check_writable()  # a read-only store fails here, before anything is embedded
        self.providers.resolve_dims()
        self._claim_team_identity()
        desired = self.desired_meta()
        stored = self.store.read_meta()
        mismatch = identity_mismatch(stored, desired)
        full = force or (mismatch is not None and stored is not None)
        dirs = scan_dirs(self.workspace, self.config)  # before the files are listed
        ctx = SyncContext(self.providers.provider, self.providers.key, desired["model"])
        indexer = Indexer(self.workspace, self.config, self.store, ctx, progress, self.extra_sources,
                          defer_sessions=defer_sessions and not full, on_text=self.store.stage, chunker=self._chunker)
        stage: Literal["files", "rebuild"] = "rebuild" if full else "files"
        try:
            if full:
                # One transaction: readers keep the old rows until the whole rebuild and its meta commit.
                with self.store.transaction():
                    report = indexer.run(full=True)
                    self.store.write_meta(desired)
                    self.store.set_kv(LAST_SYNC_KEY, repr(time.time()))
                stage = "files"  # committed: the new rows are the ones kept
                report.rebuild_reason = "forced" if force and mismatch is None else mismatch
            else:
                report = indexer.run(full=False)
                if stored != desired:
                    self.store.write_meta(desired)
                self.store.set_kv(LAST_SYNC_KEY, repr(time.time()))
            self.monitor.synced(SyncRun(report, indexer.observed), dirs, generation, len(self.store.files()))
        except PgFault as fault:
            raise SyncStopped(fault, stage) from fault
        return report

    def compare_with_files(self) -> Comparison:
        """The files on disk against this agent's rows, without the lock (what a sync would do now)."""
        dirs, dirs_racy = scan_dirs(self.workspace, self.config)  # before the files are listed
        indexed, skipped, meta = self.store.files(), self.store.skipped(), self.store.read_meta()
        observed: dict[str, Observed] = {}
        pending = pending_changes(self.workspace, self.config, self.extra_sources, indexed, skipped, observed)
        desired = self.desired_meta()
        if self.config.store.readOnly and self.providers.provider is None:
            # Keyword-only over rows it may not write: whatever vectors they hold, only the text must fit.
            desired = {k: v for k, v in desired.items() if k not in EMBEDDING_KEYS}
        mismatch = identity_mismatch(meta, desired, ignore_unknown=True)
        return Comparison(pending, mismatch, meta is not None, dirs, dirs_racy, observed)

    def index_last_sync_at(self) -> float | None:
        """The last sync of this agent's rows by any process (this process's if newer)."""
        try:
            raw = self.store.get_kv(LAST_SYNC_KEY)
            stored = float(raw) if raw else None
        except Exception:
            stored = None
        candidates = [t for t in (stored, self.last_sync_at) if t]
        return max(candidates) if candidates else None

    # -- search ----------------------------------------------------------------------------------
    def run_search(self, request: SearchRequest) -> SearchResponse:
        query, max_results, min_score, session_key, sources = (
            request.query, request.max_results, request.min_score, request.session_key, request.sources
        )
        if self._closed:
            raise MdrecallError("manager is closed")
        now, as_of = search_times(request.now, request.as_of)
        selection = self.providers.selection
        provider = selection.provider
        stale, notes = self.monitor.before_search(session_key)
        unchanged = self.monitor.unchanged_token()  # files the search's caches checked under it: no stat
        text = (query or "").strip()
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

        q = self.config.query
        degraded: list[str] = []
        skipped: list[str] = []
        if provider is None:
            degraded.append(f"keyword-only: {selection.unavailable_reason}")
        query_vec: np.ndarray[Any, np.dtype[np.float32]] | None = None
        if provider is not None:
            team = self.team_identity()
            skip = vector_skip_reason(self.config, text, provider.languages)
            if team is not None and team.get("providerKey") != self.providers.key:
                degraded.append(
                    f"vector search off: team {self.team_id!r} stores vectors of {team.get('provider')}/{team.get('model')}, "
                    f"this agent queries with {provider.id}/{provider.model}"
                )
            elif skip is not None:
                skipped.append(skip)
            else:
                try:
                    query_vec = np.asarray(provider.embed_query(text), dtype=np.float32)
                except Exception as exc:  # any provider failure degrades this query to keywords
                    degraded.append(f"query embedding failed, answered by keyword search only: {exc}")
                if query_vec is not None and not np.any(query_vec):
                    query_vec = None
        scope = scope_for(self.config, None if set(wanted) == set(configured) else wanted, session_key)
        plan = SearchPlan(
            query=text,
            max_results=max_results or q.maxResults,
            min_score=q.minScore if min_score is None else min_score,
            scope=scope,
            now=now,
            line_lengths=lengths_for(self.workspace),
            as_of=as_of,
            times=times_for(self.workspace),
        )
        use_vectors = query_vec is not None
        mode: SearchMode = ("hybrid" if q.hybrid.enabled else "vector-only") if use_vectors else "keyword-only"

        def ranked(conn: Any) -> SearchOutcome:
            keyword, vector = retrieve(
                conn, me=self.agent_id, query=text, query_vec=query_vec,
                limit=candidate_limit(self.config, plan.max_results, as_of), scope=scope,
                ts_config=self.settings.textSearchConfig, keywords=q.hybrid.enabled or not use_vectors,
            )
            # Calibrated scores from the statistics of what this agent can see (corpus.py).
            corpus = PgCorpus(conn, self._corpus_stats, self.settings.textSearchConfig)
            return rank_candidates(self.config, plan, keyword, vector, mode, degraded + skipped, bool(degraded),
                                   corpus=corpus, query_vec=query_vec, model=provider.model if provider else None)

        with files_unchanged(unchanged):
            outcome = self.store.read(ranked)  # once more on a fresh connection if a restart cut this one
        response.results = outcome.results
        response.mode = outcome.mode
        response.degraded = outcome.degraded
        response.warnings.extend(outcome.warnings)
        response.reason = outcome.reason
        self._notify_search(text, response, session_key, now)
        return response

    # -- read ------------------------------------------------------------------------------------
    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        team_path = parse_team_path(rel_path)
        if team_path is not None and team_path[0] == self.agent_id:
            rel_path, team_path = team_path[1], None  # one's own "@me/path" is one's own file
        if team_path is None:
            result = read_memory_lines(self.workspace, self.config, rel_path, from_line, lines)
        else:
            agent, path = team_path
            content = self.store.shared_file(agent, path)
            shown = f"@{agent}/{path}"
            if content is None:
                raise PathError("not_found", f"{shown!r} is not a team memory visible to agent {self.agent_id!r}")
            result = window_lines(content, shown, from_line, lines, self.config)
        self._notify_read(result.path, result.from_line, result.lines, datetime.now(UTC))
        return result

    # -- status & probes -------------------------------------------------------------------------
    def status(self) -> Status:
        from mdrecall.backends.postgres.status import build_status

        return build_status(self)

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
        return self.providers.provider is not None and self._vectors_match_team()


def create_manager(workspace: Path, config: MemoryConfig) -> PostgresMemoryManager:
    manager = PostgresMemoryManager(workspace, config)
    manager.start_background()
    return manager


__all__ = ["PostgresMemoryManager", "create_manager", "parse_team_path"]
