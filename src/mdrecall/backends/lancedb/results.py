"""The one place where long-term memory rows become ``MemorySearchManager`` contract values.

Everything shaped by the contract (``SearchResponse``/``SearchResult``, the ``read_file`` dict, the
``status()`` dict, citations) is built here, so adapting to the typed ``SearchHit``/``ReadResult``/
``Status`` of the restructured core is a change to this module only.

Citations: an entry is cited ``ltm:<id>`` (its ``path`` too, with lines 1..n of its text), so
``memory_get {path: "ltm:<id>"}`` reads it back and dreaming can tell it from a Markdown file.
Hits have ``source: "memory"``: they are the long-term memory corpus, so ``corpus: "memory"`` in
``memory_search`` keeps them.
"""

from __future__ import annotations

from typing import Any, Sequence

from mdrecall.errors import PathError
from mdrecall.types import SearchResponse, SearchResult

CITATION_PREFIX = "ltm:"
SOURCE = "memory"


def citation(memory_id: str) -> str:
    return f"{CITATION_PREFIX}{memory_id}"


def parse_citation(path: str) -> str:
    """The memory id in ``ltm:<id>`` (a trailing ``#L1`` or ``#L1-L3`` is accepted); PathError otherwise."""
    text = (path or "").strip()
    if not text.startswith(CITATION_PREFIX):
        raise PathError(
            "not_memory_path", f"{path!r} is not a long-term memory; this backend reads entries cited as ltm:<id>"
        )
    memory_id = text[len(CITATION_PREFIX) :].split("#", 1)[0].strip()
    if not memory_id:
        raise PathError("invalid_path", f"{path!r} names no memory id")
    return memory_id


def search_result(row: Any, score: float) -> SearchResult:
    lines = max(1, row.text.count("\n") + 1)
    return SearchResult(
        path=citation(row.id),
        start_line=1,
        end_line=lines,
        score=round(float(score), 6),
        snippet=row.text,
        source=SOURCE,
        citation=citation(row.id),
        vector_score=row.score,
        text_score=None,
    )


def search_response(
    scored: Sequence[tuple[Any, float]], *, mode: str, provider: str, model: str, degraded: bool = False,
    warnings: Sequence[str] = (),
) -> SearchResponse:
    return SearchResponse(
        results=[search_result(row, score) for row, score in scored],
        mode=mode,  # type: ignore[arg-type]
        provider=provider,
        model=model,
        degraded=degraded,
        warnings=list(warnings),
        stale=False,
        freshness={"backend": "lancedb", "live": True},
    )


def read_result(row: Any, from_line: int | None, lines: int | None, max_lines: int, max_chars: int) -> dict[str, Any]:
    all_lines = row.text.split("\n")
    start = max(1, from_line or 1)
    count = min(lines or max_lines, max_lines)
    selected = all_lines[start - 1 : start - 1 + count]
    text = "\n".join(selected)
    truncated = start - 1 + len(selected) < len(all_lines)
    if len(text) > max_chars:
        text, truncated = text[:max_chars], True
    out: dict[str, Any] = {
        "text": text,
        "path": citation(row.id),
        "from": start,
        "lines": len(selected),
        "totalLines": len(all_lines),
        "category": row.category,
        "createdAt": row.created_at,
    }
    if truncated:
        out["truncated"] = True
        if start - 1 + len(selected) < len(all_lines):
            out["nextFrom"] = start + len(selected)
    return out


def status_dict(
    *, workspace: str, db_uri: str, entries: int, provider: str, model: str, dims: int | None, mode: str,
    reasons: Sequence[str], last_sync_at: str | None, last_error: str | None, warnings: Sequence[str],
    details: dict[str, Any],
) -> dict[str, Any]:
    """Today's status shape: the common fields the CLI and tools read, plus ``details``."""
    return {
        "backend": "lancedb",
        "workspaceDir": workspace,
        "dbPath": db_uri,
        "files": 0,
        "chunks": entries,
        "entries": entries,
        "provider": provider,
        "model": model,
        "dims": dims,
        "searchMode": mode,
        "modeReasons": list(reasons),
        "clean": True,
        "dirty": False,
        "warnings": list(warnings),
        "lastSyncAt": last_sync_at,
        "lastError": last_error,
        # Keys the builtin's CLI status printer reads.
        "vector": {"enabled": True, "available": mode == "vector-only", "backend": "lancedb" if mode == "vector-only" else None,
                   "dims": dims},
        "cache": {"enabled": False, "entries": 0, "maxEntries": 0},
        "skipped": [],
        "details": details,
    }
