"""``PostgresMemoryManager``: the ``MemorySearchManager`` contract over the team store.

This module is the one place that maps the backend onto the contract (SearchResponse, read_file's
dict, status's dict, SyncReport); store.py, search.py and schema.py know nothing of it.

* Sync: the builtin's ``Indexer`` (discovery, chunking, transcripts, the embedding cache, hash-based
  incremental writes) runs against ``PgStore`` under this agent's advisory lock. ``TeamIndexer`` only
  hands the store the text each file was chunked from, which decides the file's visibility.
* Search: on-search sync as configured, then one SQL round trip for both candidate lists and the
  builtin's ranking (``rank_candidates``). Other agents' team files come back as ``@agent/path``.
* read_file: this agent's own paths are read from its workspace exactly as the builtin does (path
  checks included); ``@agent/path`` is served from the store's copy of a team file, which the database
  only returns when that file is visible to this agent's role. A private or missing file gives the
  same ``not_found``, so a crafted path cannot even learn that a private file exists.
* Embedding identity: the team's vectors must come from one model (agents compare their queries with
  each other's vectors); the first agent to sync with vectors fixes it in the store, and an agent
  configured otherwise gets a clear error on sync and keyword-only answers on search.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Sequence

import numpy as np

from mdrecall.backends.postgres.schema import LATEST
from mdrecall.backends.postgres.search import retrieve
from mdrecall.backends.postgres.settings import PostgresSettings, load_settings
from mdrecall.backends.postgres.store import TEAM_IDENTITY_KEY, PgStore
from mdrecall.chunking import Chunk
from mdrecall.config import MemoryConfig
from mdrecall.embeddings.base import provider_key as compute_provider_key
from mdrecall.embeddings.registry import ProviderSelection, select_provider
from mdrecall.errors import MdrecallError, PathError, StoreError
from mdrecall.manager import BUSY_OTHER_PROCESS, BUSY_OTHER_THREAD, LAST_SYNC_KEY, BuiltinMemoryManager, _scope_hash
from mdrecall.search.pipeline import SearchPlan, candidate_limit, rank_candidates, vector_skip_reason
from mdrecall.search.scope import Scope
from mdrecall.sync import Indexer, ProgressCallback, SourceAdapter, SyncContext
from mdrecall.types import ProbeResult, SearchMode, SearchResponse, SyncReport
from mdrecall.workspace import MAX_PATH_CHARS, MemoryFile, resolve_memory_path

log = logging.getLogger(__name__)


def _iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat() if epoch else None


class TeamIndexer(Indexer):
    """The builtin indexer, telling the store which text each file was chunked from."""

    def _chunk(self, file: MemoryFile, text: str) -> tuple[list[Chunk], list[int] | None]:
        self.db.stage(file.rel_path, text)  # type: ignore[attr-defined]
        return super()._chunk(file, text)


def window(content: str, path: str, from_line: int | None, lines: int | None, config: MemoryConfig) -> dict[str, Any]:
    """read_file's answer for ``content``: a window of lines within ``read.maxLines``/``maxChars``."""
    limits = config.read
    start = 1 if from_line is None else int(from_line)
    if start < 1:
        raise PathError("invalid_path", f"from must be ≥ 1 (got {from_line})")
    count = limits.maxLines if lines is None else max(1, min(int(lines), limits.maxLines))
    all_lines = content.replace("\r\n", "\n").split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    selected = all_lines[start - 1 : start - 1 + count]
    truncated = start - 1 + count < len(all_lines)
    text = "\n".join(selected)
    if len(text) > limits.maxChars:
        kept: list[str] = []
        size = 0
        for line in selected:
            if size + len(line) + 1 > limits.maxChars:
                break
            kept.append(line)
            size += len(line) + 1
        selected = kept or [selected[0][: limits.maxChars]]  # one huge line: cut it
        text = "\n".join(selected)
        truncated = True
    result: dict[str, Any] = {"text": text, "path": path, "from": start, "lines": len(selected),
                              "totalLines": len(all_lines)}
    if truncated:
        result["truncated"] = True
        result["nextFrom"] = start + len(selected)
    return result


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


class PostgresMemoryManager:
    backend = "postgres"

    def __init__(self, workspace: Path, config: MemoryConfig, *, settings: PostgresSettings | None = None) -> None:
        self.workspace = workspace
        self.config = config
        self.settings = settings or load_settings(config)
        self.store = PgStore(self.settings, application_name=f"mdrecall:{self.settings.agentId or 'agent'}")
        self.agent_id = self.store.identity.agent_id
        self.team_id = self.store.identity.team_id
        self.extra_sources: list[SourceAdapter] = []
        if "sessions" in config.sources:
            from mdrecall.sessions import SessionSource

            self.extra_sources.append(SessionSource(workspace, config))
        self._sync_mutex = threading.Lock()
        self._provider_mutex = threading.Lock()
        self._selection: ProviderSelection | None = None
        self._provider_key: str | None = None
        self._sessions_seen: set[str] = set()
        self._last_sync_at: float | None = None
        self._last_error: str | None = None
        self._last_report: SyncReport | None = None
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> "PostgresMemoryManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.store.close()
        provider = self._selection.provider if self._selection is not None else None
        closer = getattr(provider, "close", None)
        if closer is not None:
            closer()

    # -- provider --------------------------------------------------------------------------------
    def _selection_or_select(self) -> ProviderSelection:
        with self._provider_mutex:
            if self._selection is None:
                self._selection = select_provider(self.config)
                provider = self._selection.provider
                identity = provider.identity if provider is not None else {"provider": "none", "model": "fts-only"}
                self._provider_key = compute_provider_key(identity)
            return self._selection

    def _desired_meta(self) -> dict[str, Any]:
        provider = self._selection_or_select().provider
        return {
            "schemaVersion": LATEST,
            "model": provider.model if provider else "fts-only",
            "provider": provider.id if provider else "none",
            "providerKey": self._provider_key,
            "sources": sorted(self.config.sources),
            "scopeHash": _scope_hash(self.workspace, self.config),
            "chunkTokens": self.config.chunking.tokens,
            "chunkOverlap": self.config.chunking.overlap,
            "vectorDims": provider.dims if provider else None,
            "sharedFolders": list(self.settings.sharedFolders),
            "textSearchConfig": self.settings.textSearchConfig,
        }

    def _team_identity(self) -> dict[str, Any] | None:
        raw = self.store.get_kv(TEAM_IDENTITY_KEY, team=True)
        return json.loads(raw) if raw else None

    def _vector_identity(self) -> dict[str, Any] | None:
        provider = self._selection_or_select().provider
        if provider is None:
            return None
        return {"provider": provider.id, "model": provider.model, "providerKey": self._provider_key, "dims": provider.dims}

    # -- sync ------------------------------------------------------------------------------------
    def sync(self, force: bool = False, progress: ProgressCallback | None = None, *,
             lock_timeout: float | None = None, defer_sessions: bool = False) -> SyncReport:
        """Bring this agent's rows up to date with its files. One sync per agent at a time across every
        process and machine (a Postgres advisory lock); ``lock_timeout`` seconds (default
        ``postgres.lockTimeoutMs``) then a busy report (``rebuild_reason``) instead of waiting on."""
        if self._closed:
            raise MdrecallError("manager is closed")
        timeout = self.settings.lockTimeoutMs / 1000.0 if lock_timeout is None else max(0.0, lock_timeout)
        if not self._sync_mutex.acquire(timeout=timeout):
            return SyncReport(rebuild_reason=BUSY_OTHER_THREAD)
        try:
            with self.store.agent_lock(timeout) as got:
                if not got:
                    return SyncReport(rebuild_reason=BUSY_OTHER_PROCESS)
                report = self._sync_locked(force, progress, defer_sessions)
        except Exception as exc:
            self._last_error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._sync_mutex.release()
        self._last_error = None
        self._last_report = report
        self._last_sync_at = time.time()
        return report

    def _sync_locked(self, force: bool, progress: ProgressCallback | None, defer_sessions: bool) -> SyncReport:
        selection = self._selection_or_select()
        provider = selection.provider
        if provider is not None and provider.dims is None and hasattr(provider, "resolve_dims"):
            provider.resolve_dims()
        desired = self._desired_meta()
        wanted = self._vector_identity()
        if wanted is not None:
            in_force = json.loads(self.store.claim_team_kv(TEAM_IDENTITY_KEY, json.dumps(wanted, sort_keys=True)))
            if in_force.get("providerKey") != wanted["providerKey"]:
                raise StoreError(
                    f"team {self.team_id!r} stores vectors of {in_force.get('provider')}/{in_force.get('model')}; "
                    f"this agent is configured for {wanted['provider']}/{wanted['model']}. Every agent of a team "
                    "must use the same embedding model (or provider: none for keywords only)"
                )
            if provider is not None and provider.dims:
                self.store.ensure_vec_table(provider.dims)
        stored = self.store.read_meta()
        mismatch = None
        if stored is None:
            mismatch = "no index yet"
        else:
            for key, value in desired.items():
                if stored.get(key) != value:
                    mismatch = f"{key} changed ({stored.get(key)!r} → {value!r})"
                    break
        full = force or (mismatch is not None and stored is not None)
        ctx = SyncContext(provider, self._provider_key or "", desired["model"])
        indexer = TeamIndexer(self.workspace, self.config, self.store, ctx, progress, self.extra_sources,
                              defer_sessions=defer_sessions and not full)
        report = indexer.run(full=full)
        if stored != desired:
            self.store.write_meta(desired)
        self.store.set_kv(LAST_SYNC_KEY, repr(time.time()))
        if full:
            report.rebuild_reason = "forced" if force and mismatch is None else mismatch
        return report

    # -- search ----------------------------------------------------------------------------------
    def search(self, query: str, max_results: int | None = None, min_score: float | None = None,
               session_key: str | None = None, sources: Sequence[str] | None = None,
               now: datetime | None = None) -> SearchResponse:
        if self._closed:
            raise MdrecallError("manager is closed")
        now = now or datetime.now(timezone.utc)
        if now.tzinfo is None:
            now = now.replace(tzinfo=timezone.utc)
        selection = self._selection_or_select()
        provider = selection.provider
        stale, warnings = self._refresh_for_search(session_key)
        text = (query or "").strip()
        configured = list(self.config.sources)
        wanted = [s for s in sources if s in configured] if sources else configured
        response = SearchResponse(
            results=[], mode="keyword-only" if provider is None else "hybrid",
            provider=provider.id if provider else "none", model=provider.model if provider else "fts-only",
            stale=stale, freshness=self._freshness(stale),
        )
        response.warnings.extend(warnings)
        if not text or not wanted:
            return response

        q = self.config.query
        degraded: list[str] = []
        if provider is None:
            degraded.append(f"keyword-only: {selection.unavailable_reason}")
        query_vec: np.ndarray | None = None
        if provider is not None:
            team = self._team_identity()
            skip = vector_skip_reason(self.config, text, getattr(provider, "languages", None))
            if team is not None and team.get("providerKey") != self._provider_key:
                degraded.append(
                    f"vector search off: team {self.team_id!r} stores vectors of {team.get('provider')}/{team.get('model')}, "
                    f"this agent queries with {provider.id}/{provider.model}"
                )
            elif skip is not None:
                response.warnings.append(skip)
            else:
                try:
                    query_vec = np.asarray(provider.embed_query(text), dtype=np.float32)
                except Exception as exc:  # any provider failure degrades this query to keywords
                    degraded.append(f"query embedding failed, answered by keyword search only: {exc}")
                if query_vec is not None and not np.any(query_vec):
                    query_vec = None
        plan = SearchPlan(
            query=text,
            max_results=max_results or q.maxResults,
            min_score=q.minScore if min_score is None else min_score,
            scope=self._scope(None if set(wanted) == set(configured) else wanted, session_key),
            now=now,
        )
        use_vectors = query_vec is not None
        with self.store.connection() as conn:
            keyword, vector = retrieve(
                conn, me=self.agent_id, query=text, query_vec=query_vec,
                limit=candidate_limit(self.config, plan.max_results), scope=plan.scope,  # type: ignore[arg-type]
                ts_config=self.settings.textSearchConfig, keywords=q.hybrid.enabled or not use_vectors,
            )
        mode: SearchMode = ("hybrid" if q.hybrid.enabled else "vector-only") if use_vectors else "keyword-only"
        outcome = rank_candidates(self.config, plan, keyword, vector, mode, response.warnings + degraded, bool(degraded))
        response.results = outcome.results
        response.mode = outcome.mode
        response.degraded = outcome.degraded
        response.warnings = outcome.warnings
        return response

    def _scope(self, sources: Sequence[str] | None, session_key: str | None) -> Scope:
        # The builtin's rule for whose transcripts a session sees (it reads only ``self.config``).
        return BuiltinMemoryManager._scope(self, sources, session_key)  # type: ignore[arg-type]

    def _refresh_for_search(self, session_key: str | None) -> tuple[bool, list[str]]:
        session_start = bool(session_key) and self.config.sync.onSessionStart and session_key not in self._sessions_seen
        if session_start:
            self._sessions_seen.add(session_key)  # type: ignore[arg-type]
        if not (self.config.sync.onSearch or session_start):
            return False, []
        try:
            report = self.sync(lock_timeout=self.config.sync.searchWaitMs / 1000.0, defer_sessions=not session_start)
        except Exception as exc:  # never let a failing sync break search
            return True, [f"index could not be refreshed ({type(exc).__name__}: {exc})"]
        if report.rebuild_reason in (BUSY_OTHER_PROCESS, BUSY_OTHER_THREAD):
            return True, [f"{report.rebuild_reason} for agent {self.agent_id!r} "
                          f"(waited {self.config.sync.searchWaitMs} ms); results may miss its latest changes"]
        return False, []

    def _freshness(self, stale: bool) -> dict[str, Any]:
        return {"stale": stale, "lastSyncAt": _iso(self._index_last_sync_at()), "checkedAt": _iso(self._last_sync_at)}

    def _index_last_sync_at(self) -> float | None:
        try:
            raw = self.store.get_kv(LAST_SYNC_KEY)
            return float(raw) if raw else None
        except Exception:
            return self._last_sync_at

    # -- read ------------------------------------------------------------------------------------
    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        team_path = parse_team_path(rel_path)
        if team_path is not None and team_path[0] == self.agent_id:
            rel_path, team_path = team_path[1], None  # one's own "@me/path" is one's own file
        if team_path is None:
            real, normalised = resolve_memory_path(self.workspace, self.config, rel_path)
            raw = real.read_bytes()
            if len(raw) > self.config.limits.maxFileBytes:
                raise PathError("invalid_path", f"{normalised} is larger than limits.maxFileBytes")
            return window(raw.decode("utf-8", errors="replace"), normalised, from_line, lines, self.config)
        agent, path = team_path
        content = self.store.shared_file(agent, path)
        shown = f"@{agent}/{path}"
        if content is None:
            raise PathError("not_found", f"{shown!r} is not a team memory visible to agent {self.agent_id!r}")
        return window(content, shown, from_line, lines, self.config)

    # -- status & probes -------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        selection = self._selection_or_select()
        provider = selection.provider
        counts = self.store.counts()
        indexed = self.store.files()
        skipped = self.store.skipped()
        meta = self.store.read_meta()
        pending = BuiltinMemoryManager._pending_changes(self, indexed, skipped)  # type: ignore[arg-type]
        team_identity = self._team_identity()
        health = self.store.health()
        health["visible"] = self.store.visible_counts()
        health["teamEmbedding"] = team_identity
        health["sharedFolders"] = list(self.settings.sharedFolders)
        warnings = []
        vector_ok = provider is not None and (team_identity is None or team_identity.get("providerKey") == self._provider_key)
        if provider is not None and not vector_ok:
            warnings.append(f"vector search off: the team stores vectors of {team_identity.get('provider')}/"  # type: ignore[union-attr]
                            f"{team_identity.get('model')}")
        if provider is not None and provider.dims and provider.dims not in health["vectorIndexes"]:
            warnings.append(f"no HNSW index for {provider.dims}-dimensional vectors yet (created by the next sync)")
        mode = "hybrid" if vector_ok else "keyword-only"
        reasons = [] if provider is not None else [f"no embedding provider: {selection.unavailable_reason}"]
        return {
            "backend": self.backend,
            "workspaceDir": str(self.workspace),
            "files": sum(c["files"] for c in counts.values()),
            "chunks": sum(c["chunks"] for c in counts.values()),
            "sourceCounts": [{"source": s, **c} for s, c in sorted(counts.items())],
            "sources": list(self.config.sources),
            "extraPaths": list(self.config.extraPaths),
            "provider": provider.id if provider else "none",
            "model": provider.model if provider else "fts-only",
            "requestedProvider": selection.requested,
            "dims": provider.dims if provider else None,
            "searchMode": mode,
            "modeReasons": reasons + warnings,
            "fts": {"enabled": True, "available": True, "error": None, "tokenizer": self.settings.textSearchConfig},
            "vector": {"enabled": provider is not None, "available": vector_ok, "backend": "pgvector-hnsw",
                       "version": self.store.caps.vec_version, "dims": provider.dims if provider else None},
            "cache": {"enabled": self.config.cache.enabled, "entries": self.store.cache_size(),
                      "maxEntries": self.settings.cacheMaxEntries, "sharedBy": "team"},
            "skipped": [{"path": p, "source": v[0], "reason": v[1]} for p, v in sorted(skipped.items())],
            "meta": meta,
            "dirty": bool(pending["count"]),
            "pendingChanges": pending if pending["count"] else {},
            "clean": not pending["count"] and meta is not None,
            "freshness": self._freshness(bool(pending["count"])),
            "lastSyncAt": _iso(self._index_last_sync_at()),
            "lastError": self._last_error,
            "lastSync": self._last_report.to_dict() if self._last_report else None,
            "warnings": warnings,
            "watcher": None,
            "postgres": health,
        }

    def probe_embedding_availability(self) -> ProbeResult:
        provider = self._selection_or_select().provider
        if provider is None:
            return ProbeResult(False, self._selection_or_select().unavailable_reason or "no embedding provider")
        try:
            vec = provider.embed_query("ping")
        except Exception as exc:
            return ProbeResult(False, f"{type(exc).__name__}: {exc}", provider.id, provider.model)
        return ProbeResult(True, None, provider.id, provider.model, len(vec))

    def probe_vector_availability(self) -> bool:
        provider = self._selection_or_select().provider
        if provider is None:
            return False
        team = self._team_identity()
        return team is None or team.get("providerKey") == self._provider_key


def create_manager(workspace: Path, config: MemoryConfig) -> PostgresMemoryManager:
    return PostgresMemoryManager(Path(os.path.abspath(workspace)), config)


__all__ = ["PostgresMemoryManager", "TeamIndexer", "create_manager", "parse_team_path", "window"]
