"""The history of one fact: its dated statements in the order they were made, with citations.

``fact_history(manager, "where does the DB run")`` searches the topic (as of a time, if given)
and lists what the search returns, oldest statement first: each with when it was stated
(search/dating.py), its citation and its status:

* ``superseded``: a newer statement replaces it (``supersededBy``: markup or confident detection);
* ``possibly superseded``: a later statement may restate it (the explanation says so; not marked);
* ``current``: nothing returned says it is out of date.

Undated statements (``MEMORY.md`` lines never promoted from a dated note) come after the dated
ones, with the date their file last changed. The list is what one search returns (``query.maxResults``
and ``query.maxInjectedChars`` bound it; ``maxResults`` here defaults to 20): statements about the
topic that the search does not find are not in it, and neither are hits it finds that are about
something else; the topic's words decide, as in any search. Works over any backend; without
explanations (a backend that gives none) only ``supersededBy`` tells statuses apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from mdrecall.contract import MemorySearchManager, search_memory
from mdrecall.search.budget import Hit
from mdrecall.search.dating import FileTimes, stated, times_for
from mdrecall.search.highlight import matched_terms
from mdrecall.types import SearchHit, SearchRequest, SearchResponse, format_citation

Status = Literal["current", "superseded", "possibly superseded"]
#: Statements listed unless asked otherwise (a history is longer than an answer).
DEFAULT_STATEMENTS = 20


@dataclass(frozen=True, slots=True)
class Statement:
    citation: str
    path: str
    start_line: int
    end_line: int
    source: str
    text: str
    #: When it was stated, for people ("2026-03-02", "2026-03-02T09:15Z", "undated (...)").
    stated: str
    #: The earliest it can have been stated (None: undated).
    stated_at: datetime | None
    status: Status
    superseded_by: str | None
    #: Later statements that may restate it (not marked: no changed value was seen).
    possibly_restated_by: str | None
    score: float

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "citation": self.citation,
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "source": self.source,
            "stated": self.stated,
            "statedAt": self.stated_at.isoformat() if self.stated_at else None,
            "status": self.status,
            "snippet": self.text,
            "score": round(self.score, 4),
        }
        if self.superseded_by:
            out["supersededBy"] = self.superseded_by
        if self.possibly_restated_by:
            out["possiblyRestatedBy"] = self.possibly_restated_by
        return out


@dataclass(slots=True)
class FactHistory:
    topic: str
    #: Oldest first; undated statements last.
    statements: list[Statement]
    as_of: datetime | None = None
    warnings: list[str] = field(default_factory=list)
    #: Why there is nothing (the search's reason), else None.
    reason: str | None = None

    @property
    def current(self) -> list[Statement]:
        return [s for s in self.statements if s.status == "current"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "asOf": self.as_of.isoformat() if self.as_of else None,
            "statements": [s.to_dict() for s in self.statements],
            "warnings": list(self.warnings),
            "reason": self.reason,
        }


def _statement_line(topic: str, hit: SearchHit) -> tuple[int, int, str]:
    """The line of a Markdown hit that holds the statement: the one with the most of the topic's
    words (headings aside); the whole hit when none has any, or for a transcript."""
    lines = hit.snippet.split("\n")
    if hit.source == "sessions" or len(lines) != hit.end_line - hit.start_line + 1 or len(lines) == 1:
        return hit.start_line, hit.end_line, hit.snippet
    counts = [0 if line.lstrip().startswith("#") else len(matched_terms(topic, line)) for line in lines]
    best = max(range(len(lines)), key=lambda i: (counts[i], -i))
    if counts[best] == 0:
        return hit.start_line, hit.end_line, hit.snippet
    return hit.start_line + best, hit.start_line + best, lines[best]


def _statement(topic: str, hit: SearchHit, times: FileTimes | None) -> Statement:
    start, end, text = _statement_line(topic, hit)
    when = stated(Hit(0, hit.path, hit.source, start, end, text), times)
    details = (hit.explanation or {}).get("supersession") or {}
    possibly = details.get("possiblyRestatedBy") if isinstance(details, dict) else None
    status: Status = "superseded" if hit.superseded_by else "possibly superseded" if possibly else "current"
    return Statement(format_citation(hit.path, start, end), hit.path, start, end, hit.source, text, when.label(),
                     when.earliest, status, hit.superseded_by, possibly if isinstance(possibly, str) else None,
                     hit.score)  # fmt: skip


def history_of(topic: str, response: SearchResponse, times: FileTimes | None, as_of: datetime | None = None) -> FactHistory:
    """The history that one search's ``response`` tells."""
    statements = [_statement(topic, hit, times) for hit in response.results]
    dated = sorted((s for s in statements if s.stated_at is not None), key=lambda s: (s.stated_at, s.citation))
    undated = [s for s in statements if s.stated_at is None]
    return FactHistory(topic, dated + undated, as_of, list(response.warnings), response.reason)


def fact_history(
    manager: MemorySearchManager,
    topic: str,
    *,
    max_results: int | None = DEFAULT_STATEMENTS,
    min_score: float | None = None,
    session_key: str | None = None,
    sources: Sequence[str] | None = None,
    as_of: datetime | None = None,
    now: datetime | None = None,
) -> FactHistory:
    """The dated statements of the fact ``topic`` names, oldest first (see the module docstring)."""
    text = (topic or "").strip()
    if not text:
        raise ValueError("topic is required: the fact to trace, e.g. 'where the database runs'")
    request = SearchRequest(text, max_results=max_results, min_score=min_score, session_key=session_key,
                            sources=sources, now=now, as_of=as_of)  # fmt: skip
    response = search_memory(manager, request)
    return history_of(text, response, times_for(manager.workspace), as_of)


__all__ = ["DEFAULT_STATEMENTS", "FactHistory", "Statement", "fact_history", "history_of"]
