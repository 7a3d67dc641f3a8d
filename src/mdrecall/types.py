"""Result, status and probe types shared by every backend.

Field names follow the seed contract (``start_line``/``end_line`` here, ``startLine``/``endLine`` in
``to_dict(camel=True)``) so the Python API, the CLI's JSON and the agent tools agree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

MemorySource = Literal["memory", "sessions"]
SearchMode = Literal["hybrid", "vector-only", "keyword-only", "file-scan"]


@dataclass(frozen=True, slots=True)
class SearchResult:
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str
    citation: str
    vector_score: float | None = None
    text_score: float | None = None

    def to_dict(self, camel: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if camel:
            return {
                "path": self.path,
                "startLine": self.start_line,
                "endLine": self.end_line,
                "score": self.score,
                "snippet": self.snippet,
                "source": self.source,
                "citation": self.citation,
            }
        return data

    # Mapping-style access so callers written against the dict contract keep working.
    def __getitem__(self, key: str) -> Any:
        aliases = {"startLine": "start_line", "endLine": "end_line"}
        return getattr(self, aliases.get(key, key))


@dataclass(slots=True)
class SearchResponse:
    """Results plus how they were produced; iterating yields the results."""

    results: list[SearchResult]
    mode: SearchMode
    provider: str
    model: str
    degraded: bool = False
    warnings: list[str] = field(default_factory=list)
    stale: bool = False
    freshness: dict[str, Any] = field(default_factory=dict)
    #: Why ``results`` is empty: "nothing relevant" (no hit reached minScore), else None.
    reason: str | None = None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> SearchResult:
        return self.results[index]

    def to_dict(self, camel: bool = False) -> dict[str, Any]:
        return {
            "results": [r.to_dict(camel=camel) for r in self.results],
            "mode": self.mode,
            "provider": self.provider,
            "model": self.model,
            "degraded": self.degraded,
            "warnings": list(self.warnings),
            "stale": self.stale,
            "freshness": dict(self.freshness),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ProbeResult:
    ok: bool
    error: str | None = None
    provider: str | None = None
    model: str | None = None
    dims: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SyncProgress:
    completed: int
    total: int
    label: str


@dataclass(slots=True)
class SyncReport:
    files_scanned: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_skipped: int = 0
    # Growing transcripts left for later: appended data below sync.sessions.delta* (automatic syncs only).
    files_deferred: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    cache_hits: int = 0
    full_rebuild: bool = False
    rebuild_reason: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
