"""The builtin MemorySearchManager: ties discovery, sync, the store and search together.

Threading: searches read through one connection, syncs write through another (WAL lets both run at
once). Across processes, one writer at a time holds ``<db>.lock``; a search never waits for another
process's sync longer than ``sync.searchWaitMs`` and says so when it answers from an index it could
not refresh.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from mdrecall.config import MemoryConfig, load_config
from mdrecall.embeddings.base import provider_key as compute_provider_key
from mdrecall.embeddings.registry import ProviderSelection, activate_fallback, select_provider
from mdrecall.errors import EmbeddingError, MdrecallError, PathError, StoreError
from mdrecall.search.pipeline import SearchPlan, run_search
from mdrecall.search.vector import InProcessVectors, sqlite_vec_search
from mdrecall.store import WriterLock, cleanup_stale_rebuilds, default_store_path, rebuild_path, remove_db_files, swap_in
from mdrecall.store.db import SCHEMA_VERSION, IndexDB, StoreOptions
from mdrecall.sync import Indexer, ProgressCallback, SourceAdapter, SyncContext, seed_cache_from
from mdrecall.types import ProbeResult, SearchResponse, SyncReport
from mdrecall.workspace import discover_memory_files, resolve_memory_path

SearchListener = Callable[[str, SearchResponse, "str | None", datetime], None]


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
        self._vectors = InProcessVectors()
        self._listeners: list[SearchListener] = []
        self._dirty = True
        self._last_sync_at: float | None = None
        self._last_check_at: float = 0.0
        self._last_error: str | None = None
        self._last_report: SyncReport | None = None
        self._sessions_seen: set[str] = set()
        self._closed = False
        self._recovered: str | None = None
        self.extra_sources: list[SourceAdapter] = []
        if "sessions" in config.sources:
            self.extra_sources.append(self._sessions_adapter())
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
        self._read_db.close()
        provider = self._selection.provider if self._selection is not None else None
        closer = getattr(provider, "close", None)
        if closer is not None:
            closer()  # remote providers hold HTTP connection pools

    def _open_db(self) -> IndexDB:
        """Open the live index; a corrupt file is moved aside and rebuilt from the Markdown."""
        try:
            db = IndexDB(self.db_path, self._store_options)
            if db.integrity_ok():
                return db
            db.close()
            reason = "integrity check failed"
        except StoreError as exc:
            reason = str(exc)
        aside = self.db_path.with_name(f"{self.db_path.name}.corrupt-{int(time.time())}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.db_path) + suffix)
            if src.exists():
                os.replace(src, Path(str(aside) + suffix))
        self._recovered = f"index at {self.db_path} was unreadable ({reason}); moved to {aside} and rebuilt from the files"
        return IndexDB(self.db_path, self._store_options)

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
        self._dirty = True

    def sync(self, force: bool = False, progress: ProgressCallback | None = None, *, lock_timeout: float | None = None) -> SyncReport:
        """Bring the index up to date with the files. Blocks while another process syncs (or gives up
        after ``lock_timeout`` seconds and returns an empty report)."""
        with self._sync_mutex:
            if not self._lock.acquire(lock_timeout):
                report = SyncReport()
                report.rebuild_reason = "another process is syncing"
                return report
            try:
                try:
                    return self._sync_locked(force, progress)
                except EmbeddingError as exc:
                    if not self._switch_to_fallback(exc):
                        raise
                    return self._sync_locked(force, progress)  # new provider identity: a full rebuild
            except Exception as exc:
                self._last_error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                self._lock.release()

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

    def _sync_locked(self, force: bool, progress: ProgressCallback | None) -> SyncReport:
        cleanup_stale_rebuilds(self.db_path)
        current = self._selection_or_select().provider
        if current is not None and current.dims is None and hasattr(current, "resolve_dims"):
            current.resolve_dims()  # remote models of unknown size: one probe before the identity is fixed
        desired = self._desired_meta()
        selection = self._selection_or_select()
        provider = selection.provider
        ctx = SyncContext(provider, self._provider_key or "", desired["model"])
        writer = IndexDB(self.db_path, self._store_options)
        try:
            mismatch = self._identity_mismatch(writer.read_meta(), desired)
            if force or mismatch:
                report = self._rebuild(writer, ctx, desired, progress)
                report.rebuild_reason = "forced" if force and not mismatch else mismatch
            else:
                if provider is not None and provider.dims:
                    writer.ensure_vec_table(provider.dims)
                report = Indexer(self.workspace, self.config, writer, ctx, progress, self.extra_sources).run(full=False)
        finally:
            writer.close()
        self._dirty = False
        self._last_sync_at = time.time()
        self._last_check_at = time.monotonic()
        self._last_error = None
        self._last_report = report
        return report

    def _rebuild(self, live: IndexDB, ctx: SyncContext, desired: dict[str, Any], progress: ProgressCallback | None) -> SyncReport:
        temp_path = rebuild_path(self.db_path)
        built = IndexDB(temp_path, self._store_options)
        try:
            seed_cache_from(built, self.db_path)
            if ctx.provider is not None and ctx.provider.dims:
                built.ensure_vec_table(ctx.provider.dims)
            report = Indexer(self.workspace, self.config, built, ctx, progress, self.extra_sources).run(full=True)
            with built.conn:
                built.write_meta(desired)
            live.close()
            swap_in(built, self.db_path, self._store_options.busy_timeout_ms)
        finally:
            built.close()
            remove_db_files(temp_path)
        report.full_rebuild = True
        return report

    def _ensure_fresh(self) -> tuple[bool, str | None]:
        """Sync before searching when allowed; returns (stale, note)."""
        if not self.config.sync.onSearch:
            return False, None
        wait = self.config.sync.searchWaitMs / 1000.0
        try:
            report = self.sync(lock_timeout=wait)
        except MdrecallError as exc:
            return True, f"index could not be refreshed: {exc}"
        except Exception as exc:  # never let a failing sync break search
            return True, f"index could not be refreshed: {type(exc).__name__}: {exc}"
        if report.rebuild_reason == "another process is syncing":
            return True, "another process is updating the index; results may miss the newest changes"
        return False, None

    # -- search ----------------------------------------------------------------------------------
    def add_search_listener(self, listener: SearchListener) -> None:
        self._listeners.append(listener)

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
        now = now or datetime.now(timezone.utc)
        if now.tzinfo is None:
            now = now.replace(tzinfo=timezone.utc)
        selection = self._selection_or_select()
        provider = selection.provider
        stale, note = False, None
        if session_key and self.config.sync.onSessionStart and session_key not in self._sessions_seen:
            self._sessions_seen.add(session_key)
        if self._needs_check():
            stale, note = self._ensure_fresh()

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
        if note:
            base.warnings.append(note)
        if not text or not wanted:
            return base

        degraded: list[str] = []
        if provider is None:
            degraded.append(f"keyword-only: {selection.unavailable_reason}")
        vector_fn = None
        embed = None
        if provider is not None:
            embed = provider.embed_query
            if self._read_db.caps.vector_available and self._read_db.vec_dims() is not None:
                vector_fn = sqlite_vec_search
            else:
                vector_fn = self._vectors.search
                degraded.append(f"vectors searched in process: {self._read_db.caps.vector_error or 'vector table missing'}")
        if not self._read_db.caps.fts_available:
            degraded.append(f"no keyword index: {self._read_db.caps.fts_error}")

        q = self.config.query
        plan = SearchPlan(
            query=text,
            max_results=max_results or q.maxResults,
            min_score=q.minScore if min_score is None else min_score,
            sources=None if set(wanted) == set(configured) else wanted,
            now=now,
            visible=self._visibility(session_key),
        )
        with self._read_mutex:
            outcome = run_search(self._read_db, self.config, plan, embed, vector_fn, degraded)
        base.results = outcome.results
        base.mode = outcome.mode
        base.degraded = outcome.degraded
        base.warnings.extend(outcome.warnings)
        for listener in list(self._listeners):
            try:
                listener(text, base, session_key, now)
            except Exception:
                pass  # recall tracking must never break a search
        return base

    def _needs_check(self) -> bool:
        if self._dirty or self._last_sync_at is None:
            return True
        interval = getattr(self.config.sync, "reconcileIntervalMs", 1000) / 1000.0
        return time.monotonic() - self._last_check_at >= interval

    def _visibility(self, session_key: str | None) -> Callable[[str, str], bool] | None:
        if "sessions" not in self.config.sources or self.config.sessions.visibility == "all":
            return None
        from mdrecall.sessions import session_key_of

        def visible(source: str, path: str) -> bool:
            if source != "sessions":
                return True
            return session_key is not None and session_key_of(path, self.config) == session_key

        return visible

    def _freshness(self, stale: bool) -> dict[str, Any]:
        return {
            "stale": stale,
            "lastSyncAt": datetime.fromtimestamp(self._last_sync_at, timezone.utc).isoformat() if self._last_sync_at else None,
            "dirty": self._dirty,
        }

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
        return result

    # -- status & probes -------------------------------------------------------------------------
    def status(self, deep: bool = False) -> dict[str, Any]:
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
        pending = self._pending_changes(indexed, skipped) if deep or True else None
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
            },
            "cache": {"enabled": self.config.cache.enabled, "entries": cache_entries, "maxEntries": self.config.cache.maxEntries},
            "fallback": {"from": selection.fallback_from, "reason": selection.fallback_reason} if selection.fallback_from else None,
            "skipped": [{"path": p, "source": v[0], "reason": v[1]} for p, v in sorted(skipped.items())],
            "meta": meta,
            "dirty": self._dirty or bool(pending),
            "pendingChanges": pending,
            "clean": not pending and meta is not None,
            "lastSyncAt": datetime.fromtimestamp(self._last_sync_at, timezone.utc).isoformat() if self._last_sync_at else None,
            "lastError": self._last_error,
            "recovered": self._recovered,
            "lastSync": self._last_report.to_dict() if self._last_report else None,
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

    def _pending_changes(self, indexed: dict[str, Any], skipped: dict[str, Any]) -> dict[str, Any]:
        """Walk the files (mtime+size) and compare with the index: what a sync would do now."""
        on_disk: dict[str, tuple[int, int]] = {}
        files = discover_memory_files(self.workspace, self.config) if "memory" in self.config.sources else []
        for adapter in self.extra_sources:
            files.extend(adapter.discover())
        for f in files:
            try:
                st = f.path.stat()
            except OSError:
                continue
            on_disk[f.rel_path] = (st.st_mtime_ns, st.st_size)
        new = [p for p in on_disk if p not in indexed and p not in skipped]
        changed = [
            p for p, (m, s) in on_disk.items()
            if p in indexed and (indexed[p].mtime != m or indexed[p].size != s)
        ]
        deleted = [p for p in indexed if p not in on_disk]
        total = len(new) + len(changed) + len(deleted)
        if total == 0:
            return {}
        return {"new": sorted(new)[:50], "changed": sorted(changed)[:50], "deleted": sorted(deleted)[:50], "count": total,
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
    return manager


def _install_features(manager: BuiltinMemoryManager) -> None:
    """Optional features that hook into every search (recall tracking for promotion)."""
    try:
        from mdrecall.dreaming import install_recall_tracking
    except ImportError:
        return
    install_recall_tracking(manager)
