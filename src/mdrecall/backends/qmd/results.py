"""The one place the QMD backend meets mdrecall's contract types (SearchResult, SearchResponse, the
status mapping). When the contract changes (SearchHit, typed Status), only this module changes."""

from __future__ import annotations

from typing import Any, Sequence

from mdrecall.search.pipeline import citation
from mdrecall.types import SearchResponse, SearchResult

#: QMD mode -> mdrecall's search mode names.
SEARCH_MODES = {"search": "keyword-only", "vsearch": "vector-only", "query": "hybrid"}


def make_result(path: str, start: int, end: int, score: float, text: str, source: str) -> SearchResult:
    score = round(min(1.0, max(0.0, score)), 6)
    return SearchResult(path, start, end, score, text, source, citation(path, start, end), None, score)


def fit_budget(results: Sequence[SearchResult], max_results: int, budget: int) -> list[SearchResult]:
    """At most ``max_results``, snippets within ``budget`` characters in total (the last one cut to
    the whole lines that fit, its end line and citation with it), as the builtin does."""
    out: list[SearchResult] = []
    used = 0
    for r in results[:max_results]:
        remaining = budget - used
        if remaining <= 0:
            break
        if len(r.snippet) <= remaining:
            out.append(r)
            used += len(r.snippet)
            continue
        kept: list[str] = []
        size = 0
        for line in r.snippet.split("\n"):
            extra = len(line) + (1 if kept else 0)
            if size + extra > remaining:
                break
            kept.append(line)
            size += extra
        if not kept:
            break
        end = r.start_line + len(kept) - 1 if r.source == "memory" else r.end_line
        out.append(make_result(r.path, r.start_line, end, r.score, "\n".join(kept), r.source))
        break
    return out


def qmd_response(results: list[SearchResult], qmd_mode: str, model: str, *, warnings: list[str], degraded: bool,
                 stale: bool, freshness: dict[str, Any]) -> SearchResponse:
    return SearchResponse(results, SEARCH_MODES[qmd_mode], "qmd", model, degraded, list(warnings), stale, dict(freshness))  # type: ignore[arg-type]


def empty_response(qmd_mode: str, model: str, warnings: list[str], freshness: dict[str, Any]) -> SearchResponse:
    return qmd_response([], qmd_mode, model, warnings=warnings, degraded=bool(warnings), stale=False, freshness=freshness)


def fallback_response(response: SearchResponse, reason: str) -> SearchResponse:
    """A builtin answer given in QMD's place: says so first in ``warnings`` and is ``degraded``."""
    response.warnings.insert(0, reason)
    response.degraded = True
    response.freshness = {**response.freshness, "answeredBy": "builtin"}
    return response


def status_mapping(common: dict[str, Any], details: dict[str, Any]) -> dict[str, Any]:
    """Today's status JSON: the common fields, the keys ``mdrecall status`` prints, and ``details``
    (QMD's own figures) — what the typed ``Status(..., details=...)`` will carry."""
    status = {
        "backend": "qmd",
        "dims": None,
        "vector": {"enabled": common["searchMode"] != "keyword-only", "available": details.get("vectorIndex"),
                   "backend": "qmd" if details.get("vectorIndex") else None, "version": None, "loadError": None},
        "cache": {"enabled": False, "entries": 0, "maxEntries": 0},
        "skipped": [],
        "pendingChanges": {},
        "warnings": [],
        **common,
        "details": details,
    }
    return status
