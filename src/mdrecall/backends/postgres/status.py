"""``status()`` of the Postgres backend: the contract's common fields, and the store's health under
``details["postgres"]``.

``files``/``chunks`` count this agent's own rows; ``details["postgres"]["visible"]`` counts what the
database lets the agent's role read (own, own shared, the team's). Like the builtin's, it walks the
files (mtime+size), so ``clean`` describes the files on disk now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from mdrecall.types import SearchMode, SkippedFile, Status

if TYPE_CHECKING:
    from mdrecall.backends.postgres.manager import PostgresMemoryManager


def redacted_dsn(dsn: str | None) -> str | None:
    """The DSN without its password (what ``status().location`` shows)."""
    if not dsn:
        return None
    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "(unparseable DSN)"
    parts.pop("password", None)
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


def build_status(manager: PostgresMemoryManager) -> Status:
    config = manager.config
    store = manager.store
    selection = manager.providers.selection
    provider = selection.provider
    counts = store.counts()
    skipped = store.skipped()
    meta = store.read_meta()
    team = manager.team_identity()
    generation = manager.monitor.generation
    comparison = manager.compare_with_files()
    manager.monitor.compared(comparison, generation)
    pending, mismatch = comparison.pending, comparison.mismatch

    health = store.health()
    health["visible"] = store.visible_counts()
    health["teamEmbedding"] = team
    health["sharedFolders"] = list(manager.settings.sharedFolders)

    warnings: list[str] = []
    vector_ok = provider is not None and (team is None or team.get("providerKey") == manager.providers.key)
    if provider is not None and team is not None and not vector_ok:
        warnings.append(f"vector search off: the team stores vectors of {team.get('provider')}/{team.get('model')}")
    if provider is not None and provider.dims and provider.dims not in health["vectorIndexes"]:
        warnings.append(f"no HNSW index for {provider.dims}-dimensional vectors yet (created by the next sync)")
    mode: SearchMode = "hybrid" if vector_ok else "keyword-only"
    reasons = [] if provider is not None else [f"no embedding provider: {selection.unavailable_reason}"]

    details: dict[str, Any] = {
        "sourceCounts": [{"source": s, **c} for s, c in sorted(counts.items())],
        "extraPaths": list(config.extraPaths),
        "requestedProvider": selection.requested,
        "providerSelection": selection.to_dict(),
        "fts": {"enabled": True, "available": True, "error": None, "textSearchConfig": manager.settings.textSearchConfig},
        "vector": {"enabled": provider is not None, "available": vector_ok, "backend": "pgvector-hnsw",
                   "version": store.caps.vec_version, "dims": provider.dims if provider else None},
        "cache": {"enabled": config.cache.enabled, "entries": store.cache_size(),
                  "maxEntries": manager.settings.cacheMaxEntries, "sharedBy": "team"},
        "meta": meta,
        "dirty": manager.monitor.dirty or bool(pending.count),
        "pendingChanges": pending.to_dict() if pending.count else {},
        "rebuildNeeded": mismatch,
        "lastSync": manager.last_report.to_dict() if manager.last_report else None,
        **manager.monitor.status(),
        "postgres": health,
        **manager.extra_status(),
    }
    freshness = manager.monitor.freshness(stale=bool(pending.outstanding) or mismatch is not None)
    return Status(
        backend=manager.backend,
        workspace_dir=str(manager.workspace),
        files=sum(c["files"] for c in counts.values()),
        chunks=sum(c["chunks"] for c in counts.values()),
        provider=provider.id if provider else "none",
        model=provider.model if provider else "fts-only",
        search_mode=mode,
        mode_reasons=reasons + warnings,
        clean=not pending.count and mismatch is None,
        dims=provider.dims if provider else None,
        sources=list(config.sources),
        skipped=[SkippedFile(p, v.source, v.reason) for p, v in sorted(skipped.items())],
        freshness=freshness,
        last_sync_at=freshness.last_sync_at,
        last_error=manager.last_error,
        location=redacted_dsn(manager.settings.dsn),
        warnings=warnings,
        details=details,
    )


__all__ = ["build_status", "redacted_dsn"]
