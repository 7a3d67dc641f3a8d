"""``status()`` of the QMD backend: the common fields typed, QMD's own state in ``details``.

``details`` says who answered the last search and why QMD did not (``answeredBy``, ``fallback``),
QMD's health and backoff, the warm process, the binary and its version, collections with QMD's
document counts, models, the last ``qmd update``, the builtin fallback engine, the watcher. Like the
builtin's, ``clean`` describes the files on disk now (a walk with mtime+size).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mdrecall.backends.qmd.health import iso
from mdrecall.backends.qmd.results import SEARCH_MODES
from mdrecall.types import Status

if TYPE_CHECKING:
    from mdrecall.backends.qmd.manager import QmdMemoryManager


def _location(manager: object) -> str | None:
    path = getattr(manager, "db_path", None)  # the builtin's index file (not part of the contract)
    return str(path) if path else None


def build_status(manager: QmdMemoryManager) -> Status:
    config = manager.config
    qmd = dict(manager.qmd_status)
    health = manager.backoff.to_dict()
    process = manager.process
    builtin = manager.builtin
    mode, mode_notes = manager.effective_mode()

    generation = manager.monitor.generation
    comparison = manager.compare_with_files()
    manager.monitor.compared(comparison, generation)
    pending = comparison.pending
    clean = comparison.has_index and not pending.count and manager.last_sync_error is None
    freshness = manager.monitor.freshness(stale=not comparison.has_index or bool(pending.outstanding))

    reasons = list(mode_notes)
    if health["failures"]:
        reasons.append(f"QMD failing ({health['lastError']}); the builtin engine answers until {health['retryAt']}")
    documents = {c.get("name"): c.get("documents") for c in qmd.get("collections") or []}
    vectors = bool(qmd.get("hasVectorIndex"))
    details: dict[str, Any] = {
        "answeredBy": manager.answered_by,
        "fallback": dict(manager.fallback_state) if manager.fallback_state else None,
        "health": health,
        "process": {
            "transport": "mcp-stdio",
            "running": bool(process and process.alive),
            "starting": manager.supervisor.starting,
            "pid": process.pid if process else None,
            "startedAt": iso(process.started_at) if process else None,
            "starts": manager.starts,
            "requests": process.requests if process else 0,
        },
        "binary": str(manager.binary) if manager.binary else None,
        "version": manager.version,
        "indexDir": str(manager.layout.root),
        "configPath": str(manager.layout.config_path),
        "mode": manager.settings.mode,
        "effectiveMode": mode,
        "keywordMatch": manager.settings.keywordMatch,
        "timeoutMs": manager.settings.timeoutMs,
        "models": {r: {"path": str(m.path), "present": m.present, "problem": m.problem} for r, m in manager.layout.models().items()},
        "collections": [
            {"name": c.name, "path": str(c.root), "pattern": c.pattern, "source": c.source, "documents": documents.get(c.name)}
            for c in manager.collections.values()
        ],
        "vector": {"enabled": mode != "search", "available": vectors, "backend": "qmd" if vectors else None, "version": None},
        "vectorIndex": vectors,
        "needsEmbedding": qmd.get("needsEmbedding"),
        "extraPaths": list(config.extraPaths),
        "dirty": manager.monitor.dirty or bool(pending.count),
        "pendingChanges": pending.to_dict() if pending.count else {},
        "lastUpdate": manager.last_update,
        "fallbackEngine": None if builtin is None else {"opened": True, "dbPath": _location(builtin)},
        **manager.monitor.status(),
        **manager.extra_status(),
    }
    files = int(qmd.get("totalDocuments") or 0)
    return Status(
        backend=manager.backend,
        workspace_dir=str(manager.workspace),
        files=files,
        chunks=files,  # QMD's unit is the document
        provider="qmd",
        model=manager.model_name(mode),
        search_mode=SEARCH_MODES[mode],
        mode_reasons=reasons,
        clean=clean,
        sources=list(config.sources),
        freshness=freshness,
        last_sync_at=iso(manager.last_sync_at),
        last_error=manager.last_sync_error or health["lastError"],
        location=str(manager.layout.db_path),
        details=details,
    )
