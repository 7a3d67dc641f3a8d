"""``status()`` of the builtin engine: what is indexed, how it searches and why, how fresh it is.

It always walks the files (mtime+size): ``clean`` describes the files on disk now, not the last sync
or event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mdrecall.embeddings.registry import ProviderSelection
from mdrecall.store.db import Capabilities
from mdrecall.types import SearchMode, SkippedFile, Status

if TYPE_CHECKING:
    from mdrecall.builtin.manager import BuiltinMemoryManager


def search_mode(selection: ProviderSelection, caps: Capabilities) -> SearchMode:
    if selection.provider is None:
        return "keyword-only" if caps.fts_available else "file-scan"
    return "hybrid" if caps.fts_available else "vector-only"


def mode_reasons(selection: ProviderSelection, caps: Capabilities) -> list[str]:
    reasons = []
    if selection.provider is None:
        reasons.append(f"no embedding provider: {selection.unavailable_reason}")
    else:
        note = getattr(selection.provider, "runtime_note", None)  # the local model on a slower runtime
        if note:
            reasons.append(str(note))
    if selection.provider is not None and not caps.vector_available:
        reasons.append(f"sqlite-vec not loaded ({caps.vector_error}); vectors are searched in process")
    if not caps.fts_available:
        reasons.append(f"FTS5 not available ({caps.fts_error}); keyword search scans stored chunks")
    return reasons


def _vector_backend(has_provider: bool, caps: Capabilities, vec_dims: int | None, encoding: str) -> str | None:
    if caps.vector_available and vec_dims and encoding == "float32":
        return "sqlite-vec"
    return "in-process" if has_provider else None


def build_status(manager: BuiltinMemoryManager) -> Status:
    config = manager.config
    selection = manager.providers.selection
    provider = selection.provider
    with manager.index.reading() as db:
        counts = db.counts()
        meta = db.read_meta()
        skipped = db.skipped()
        cache_entries, cache_unused = db.cache_size(), db.cache_unused()
        vec_dims = db.vec_dims()
        encoding = db.vector_encoding()
        caps = db.caps
    generation = manager.monitor.generation
    comparison = manager.compare_with_files()
    manager.monitor.compared(comparison, generation)
    pending = comparison.pending
    mismatch = comparison.mismatch
    clean = not pending.count and mismatch is None
    cache = manager.vectors
    details: dict[str, Any] = {
        "sourceCounts": [{"source": s, **c} for s, c in sorted(counts.items())],
        "extraPaths": list(config.extraPaths),
        "requestedProvider": selection.requested,
        # What runs the model in this process (local: onnxruntime, numpy or torch), and why not the fastest.
        "embeddingRuntime": {"runsOn": getattr(provider, "runtime", None), "note": getattr(provider, "runtime_note", None)}
        if provider is not None else None,
        "providerSelection": selection.to_dict(),
        "fts": {"enabled": config.query.fts.enabled, "available": caps.fts_available, "error": caps.fts_error,
                "tokenizer": config.query.fts.tokenizer},
        "vector": {
            "enabled": config.store.vector.enabled,
            "available": caps.vector_available,
            # Who scans the stored vectors past the memory budget: sqlite-vec reads float32 files only.
            "backend": _vector_backend(provider is not None, caps, vec_dims, encoding),
            "encoding": encoding,
            "loadError": caps.vector_error,
            "version": caps.vec_version,
            "dims": vec_dims,
            # The in-memory copy of the vectors that answers KNN while it fits the budget.
            "memoryCache": {
                "maxMiB": config.store.vector.memoryCacheMiB,
                "loadedVectors": cache.loaded_vectors,
                "loadedMiB": round(cache.loaded_bytes / 2**20, 1),
            },
            # Past the budget: the approximate index beside the file (None: store.vector.approximate off).
            "approximate": manager.ann.status() if manager.ann is not None else None,
        },
        # entries: every stored vector; unused: those no chunk uses (maxEntries bounds them).
        "cache": {"enabled": config.cache.enabled, "entries": cache_entries, "unused": cache_unused,
                  "maxEntries": config.cache.maxEntries},
        "fallback": {"from": selection.fallback_from, "reason": selection.fallback_reason} if selection.fallback_from else None,
        # Remote providers: the last failed call (retried or not) and the OpenAI Batch API state.
        "providerError": provider.last_error if provider else None,
        "batch": provider.batch_api.status() if provider is not None and provider.batch_api is not None else {"enabled": False},
        "meta": meta,
        "dirty": manager.monitor.dirty or bool(pending.count),
        "pendingChanges": pending.to_dict() if pending.count else {},
        "rebuildNeeded": mismatch,
        "migration": dict(manager.migration) if manager.migration else None,
        "recovered": manager.index.recovered,
        "integrityCheck": manager.index.integrity,
        "lastSync": manager.last_report.to_dict() if manager.last_report else None,
        **manager.monitor.status(),
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
        search_mode=search_mode(selection, caps),
        mode_reasons=mode_reasons(selection, caps),
        clean=clean,
        dims=provider.dims if provider else None,
        sources=list(config.sources),
        skipped=[SkippedFile(p, v.source, v.reason) for p, v in sorted(skipped.items())],
        freshness=freshness,
        last_sync_at=freshness.last_sync_at,
        last_error=manager.last_error,
        location=str(manager.db_path),
        details=details,
    )
