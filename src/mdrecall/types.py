"""The records every backend returns: search hits and responses, reads, status, sync reports, probes.

Attributes are snake_case; ``to_dict()`` gives the JSON shape the CLI, the agent tools and MCP share
(camelCase keys, as in the seed contract: ``startLine``, ``searchMode``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from typing import Any, Literal, TypedDict

MemorySource = Literal["memory", "sessions"]
SearchMode = Literal["hybrid", "vector-only", "keyword-only", "file-scan"]


def format_citation(path: str, start_line: int, end_line: int) -> str:
    """``path#L3`` for one line, ``path#L3-L7`` for a range (what ``read_file`` accepts back)."""
    return f"{path}#L{start_line}" if start_line == end_line else f"{path}#L{start_line}-L{end_line}"


class SearchOptions(TypedDict, total=False):
    """The keyword arguments ``manager.search(query, ...)`` takes: :class:`SearchRequest`'s fields."""

    max_results: int | None
    min_score: float | None
    session_key: str | None
    sources: Sequence[str] | None
    now: datetime | None
    as_of: datetime | None


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One search: what is asked and how it may be answered, as one value every backend receives.

    ``manager.search(SearchRequest("q", max_results=5))`` and ``manager.search("q", max_results=5)``
    are the same search; a new option is a new field here, not a new argument in every backend.
    """

    query: str
    #: Most results (None: ``query.maxResults``).
    max_results: int | None = None
    #: Drop results scoring below this (None: ``query.minScore``).
    min_score: float | None = None
    #: Who is asking: that session's transcripts are visible (docs/sessions.md).
    session_key: str | None = None
    #: Which sources may answer (``memory``, ``sessions``); None: every configured one.
    sources: Sequence[str] | None = None
    #: Answer as of this time: temporal decay is measured from it (None: now).
    now: datetime | None = None
    #: Answer "as known then": only what was written by this time (docs/facts.md); None: everything.
    as_of: datetime | None = None

    def __post_init__(self) -> None:
        if self.sources is not None and not isinstance(self.sources, tuple):
            object.__setattr__(self, "sources", tuple(self.sources))

    @classmethod
    def of(cls, query: str | SearchRequest, **options: Any) -> SearchRequest:
        """``query`` as a request (options replace its fields); an unknown option is a TypeError."""
        if isinstance(query, SearchRequest):
            return replace(query, **options) if options else query
        return cls(query, **options)

    def options(self) -> SearchOptions:
        """Every field but the query, as ``search``'s keyword arguments."""
        out: Any = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "query"}
        return out  # the fields are SearchOptions' keys (tests/test_types.py checks they match)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: a line range of one file, its score in [0, 1] and a citation ``path#Lx-Ly``."""

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str
    citation: str
    vector_score: float | None = None
    text_score: float | None = None
    #: Why it scored what it did, signal by signal (keyword terms and scores, vector cosine, the
    #: calibrated parts, date boost, supersession, decay; docs/retrieval.md), as JSON; None when the
    #: backend does not say. Agent tools leave it out; ``mdrecall search --explain`` and the web
    #: inspector show it.
    explanation: dict[str, Any] | None = None
    #: The citation (``path#Lx``) of a newer statement of the same fact, when this hit's statement
    #: is known to be out of date: marked up (``<!-- supersedes: ... -->``) or detected with
    #: confidence (docs/facts.md); None otherwise, also when a restatement is only possible.
    superseded_by: str | None = None

    def to_dict(self, camel: bool = False) -> dict[str, Any]:
        if not camel:
            return asdict(self)
        out: dict[str, Any] = {
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "score": self.score,
            "snippet": self.snippet,
            "source": self.source,
            "citation": self.citation,
        }
        if self.superseded_by is not None:
            out["supersededBy"] = self.superseded_by
        if self.explanation is not None:
            out["explanation"] = self.explanation
        return out


@dataclass(frozen=True, slots=True)
class Freshness:
    """What an answer knows about the index's freshness, as of ``checked_at``."""

    stale: bool = False
    checked_at: str | None = None
    last_sync_at: str | None = None
    files_on_disk: int | None = None
    files_indexed: int | None = None
    pending_changes: int | None = None
    deferred_sessions: int = 0
    dirty: bool = False
    watcher: Literal["running", "stopped", "failed", "off"] = "off"

    def to_dict(self) -> dict[str, Any]:
        return {
            "stale": self.stale,
            "checkedAt": self.checked_at,
            "lastSyncAt": self.last_sync_at,
            "filesOnDisk": self.files_on_disk,
            "filesIndexed": self.files_indexed,
            "pendingChanges": self.pending_changes,
            "deferredSessions": self.deferred_sessions,
            "dirty": self.dirty,
            "watcher": self.watcher,
        }


@dataclass(slots=True)
class SearchResponse:
    """Hits plus how they were produced; iterating yields the hits."""

    results: list[SearchHit]
    mode: SearchMode
    provider: str
    model: str
    degraded: bool = False
    warnings: list[str] = field(default_factory=list)
    stale: bool = False
    freshness: Freshness = field(default_factory=Freshness)
    #: Why ``results`` is empty: ``"nothing relevant"`` (candidates existed, none reached
    #: ``minScore``), ``"no candidates"``; None when there are results or the backend cannot tell.
    reason: str | None = None

    def __iter__(self) -> Iterator[SearchHit]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> SearchHit:
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
            "freshness": self.freshness.to_dict(),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Lines of one memory file, as ``read_file``/``memory_get`` return them."""

    text: str
    path: str
    from_line: int
    lines: int
    total_lines: int
    truncated: bool = False
    #: Where the next page starts, when there is one to read with ``from_line``.
    next_from: int | None = None
    #: One line longer than ``read.maxChars`` was cut: no page continues inside a line, so there is
    #: no ``next_from``; the rest of that line is only in the file itself.
    line_cut: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "path": self.path,
            "from": self.from_line,
            "lines": self.lines,
            "totalLines": self.total_lines,
        }
        if self.truncated:
            out["truncated"] = True
            if self.next_from is not None:
                out["nextFrom"] = self.next_from
            if self.line_cut:
                out["lineCut"] = True
        return out


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


ProgressCallback = Callable[[SyncProgress], None]


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


@dataclass(frozen=True, slots=True)
class SkippedFile:
    path: str
    source: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Status:
    """A backend's health: what is indexed, how it searches and why, and how fresh it is.

    The fields every backend fills; ``details`` holds backend-specific figures (for the builtin
    engine: FTS5 and sqlite-vec state, the embedding cache, provider selection, pending changes,
    the integrity check, the watcher, ...), already in JSON shape.
    """

    backend: str
    workspace_dir: str
    files: int
    chunks: int
    provider: str
    model: str
    search_mode: SearchMode
    #: Why the mode is what it is (a missing provider or extension), empty when nothing is degraded.
    mode_reasons: list[str] = field(default_factory=list)
    #: The index matches the files on disk now (no pending change, no rebuild needed).
    clean: bool = True
    dims: int | None = None
    sources: list[str] = field(default_factory=lambda: ["memory"])
    skipped: list[SkippedFile] = field(default_factory=list)
    freshness: Freshness = field(default_factory=Freshness)
    last_sync_at: str | None = None
    last_error: str | None = None
    #: Where the index lives (a file, a folder, a DSN without its password), when there is one.
    location: str | None = None
    warnings: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "workspaceDir": self.workspace_dir,
            "dbPath": self.location,
            "files": self.files,
            "chunks": self.chunks,
            "provider": self.provider,
            "model": self.model,
            "dims": self.dims,
            "searchMode": self.search_mode,
            "modeReasons": list(self.mode_reasons),
            "sources": list(self.sources),
            "clean": self.clean,
            "skipped": [s.to_dict() for s in self.skipped],
            "freshness": self.freshness.to_dict(),
            "lastSyncAt": self.last_sync_at,
            "lastError": self.last_error,
            "warnings": list(self.warnings),
            **self.details,
        }
