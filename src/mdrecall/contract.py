"""The contract every memory backend implements, and the base class that gives it the common parts.

``MemorySearchManager`` is what the CLI, the MCP server, the agent tools and dreaming are written
against; the builtin SQLite engine, LanceDB, QMD, Postgres and third-party backends all satisfy it
(``tests/contract/`` runs the same suite against each). :class:`ManagerBase` supplies what does not
depend on the backend: listeners for searches and reads (recall tracking hooks in there), flush and
close hooks, the context manager and the asyncio wrappers.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Unpack, cast, runtime_checkable

from mdrecall.types import (
    ProbeResult,
    ProgressCallback,
    ReadResult,
    SearchOptions,
    SearchRequest,
    SearchResponse,
    Status,
    SyncReport,
)

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig

log = logging.getLogger(__name__)

#: ``listener(query, response, session_key, now)`` after each search that ran.
SearchListener = Callable[[str, SearchResponse, "str | None", datetime], None]
#: ``listener(path, from_line, lines, now)`` after each successful ``read_file``.
ReadListener = Callable[[str, int, int, datetime], None]

#: What a search says when its backend cannot answer "as known then" (``as_of``).
AS_OF_UNSUPPORTED = "as-of search is not supported by the {backend} backend: these results are what it knows now"


def _search_parameters(manager: MemorySearchManager) -> Mapping[str, Any] | None:
    import inspect  # only for backends that override search (start-up time)

    try:
        return inspect.signature(manager.search).parameters
    except (TypeError, ValueError, AttributeError):
        return None


def _takes_request(manager: MemorySearchManager) -> bool:
    """Whether ``manager.search`` takes a :class:`SearchRequest` (every backend but those written
    before it, whose ``search(query, max_results, ...)`` names its options one by one)."""
    if isinstance(manager, ManagerBase) and type(manager).search is ManagerBase.search:
        return True
    parameters = _search_parameters(manager)
    return parameters is not None and "max_results" not in parameters


def supports_as_of(manager: MemorySearchManager) -> bool:
    """Does ``manager.search`` take ``as_of``? (Backends written before it was in the contract do not.)"""
    if _takes_request(manager):
        return True
    import inspect

    parameters = _search_parameters(manager) or {}
    return "as_of" in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def search_memory(manager: MemorySearchManager, request: SearchRequest) -> SearchResponse:
    """Run ``request`` on any backend. A backend written before :class:`SearchRequest` (its own
    ``search(query, max_results, ...)``) is called as it always was; one written before ``as_of``
    answers as of now, and the response says so (``AS_OF_UNSUPPORTED``) instead of failing."""
    if _takes_request(manager):
        return manager.search(request)
    # Positionally, as every version before SearchRequest called it.
    legacy: Any = manager
    r = request
    if r.as_of is None:
        return cast(SearchResponse, legacy.search(r.query, r.max_results, r.min_score, r.session_key, r.sources, r.now))
    if supports_as_of(manager):
        return cast(SearchResponse, legacy.search(r.query, r.max_results, r.min_score, r.session_key, r.sources, r.now,
                                                  as_of=r.as_of))  # fmt: skip
    response = cast(SearchResponse, legacy.search(r.query, r.max_results, r.min_score, r.session_key, r.sources, r.now or r.as_of))
    response.warnings.append(AS_OF_UNSUPPORTED.format(backend=getattr(manager, "backend", "custom")))
    return response


def search_as_of(manager: MemorySearchManager, query: str, **options: Unpack[SearchOptions]) -> SearchResponse:
    """:func:`search_memory` with the request's fields as keywords (kept for callers of older versions)."""
    return search_memory(manager, SearchRequest(query, **options))


@runtime_checkable
class MemorySearchManager(Protocol):
    """One workspace's memory, whatever stores it.

    ``search`` takes a :class:`~mdrecall.types.SearchRequest`, or a query and the request's other
    fields as keywords (``search("q", max_results=5)``). ``as_of=T`` answers "as known then": only
    what was written by ``T`` (docs/facts.md); a backend that cannot tell says so in the response's
    warnings. Callers that may hold a backend written before ``SearchRequest`` use
    :func:`search_memory`.
    """

    #: The backend's name, as ``config.backend`` selects it.
    backend: str
    workspace: Path
    config: MemoryConfig

    def search(self, query: str | SearchRequest, **options: Unpack[SearchOptions]) -> SearchResponse: ...

    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult: ...

    def status(self) -> Status: ...

    def sync(self, force: bool = False, progress: ProgressCallback | None = None) -> SyncReport: ...

    def probe_embedding_availability(self) -> ProbeResult: ...

    def probe_vector_availability(self) -> bool: ...

    def add_search_listener(self, listener: SearchListener) -> None: ...

    def add_read_listener(self, listener: ReadListener) -> None: ...

    def add_flush_hook(self, hook: Callable[[], object]) -> None: ...

    def add_close_hook(self, hook: Callable[[], object]) -> None: ...

    def add_status_section(self, key: str, section: Callable[[], object]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> MemorySearchManager: ...

    def __exit__(self, *exc: object) -> None: ...


class ManagerBase(ABC):
    """The backend-independent half of :class:`MemorySearchManager`.

    A backend implements :meth:`run_search` (one :class:`~mdrecall.types.SearchRequest` in, a
    response out; :meth:`search` builds the request from whatever the caller passed) and the
    abstract methods, calls :meth:`_notify_search` / :meth:`_notify_read`
    after each search and read, and runs :meth:`_run_close_hooks` first thing in ``close()``.
    """

    backend: str = "custom"

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        self.workspace = workspace
        self.config = config
        self._search_listeners: list[SearchListener] = []
        self._read_listeners: list[ReadListener] = []
        self._flush_hooks: list[Callable[[], object]] = []
        self._close_hooks: list[Callable[[], object]] = []
        self._status_sections: dict[str, Callable[[], object]] = {}

    # -- listeners and hooks ----------------------------------------------------------------------
    def add_search_listener(self, listener: SearchListener) -> None:
        self._search_listeners.append(listener)

    def add_read_listener(self, listener: ReadListener) -> None:
        self._read_listeners.append(listener)

    def add_flush_hook(self, hook: Callable[[], object]) -> None:
        """``hook()`` runs on :meth:`flush`: wait for background work a listener queued."""
        self._flush_hooks.append(hook)

    def add_close_hook(self, hook: Callable[[], object]) -> None:
        """``hook()`` runs first thing in ``close()`` (drain and stop a listener's thread)."""
        self._close_hooks.append(hook)

    def add_status_section(self, key: str, section: Callable[[], object]) -> None:
        """``status().details[key]`` is ``section()``: a feature's own state (recall tracking)."""
        self._status_sections[key] = section

    def extra_status(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, section in self._status_sections.items():
            try:
                out[key] = section()
            except Exception as exc:  # a feature's report must never break status
                out[key] = {"error": f"{type(exc).__name__}: {exc}"}
        return out

    def flush(self) -> None:
        """Wait until what searches and reads queued in the background (recall tracking) is written."""
        for hook in self._flush_hooks:
            hook()

    def _notify_search(self, query: str, response: SearchResponse, session_key: str | None, now: datetime) -> None:
        for listener in list(self._search_listeners):
            try:
                listener(query, response, session_key, now)
            except Exception as exc:  # recall tracking must never break a search
                log.warning("mdrecall: search listener failed: %s", exc)

    def _notify_read(self, path: str, from_line: int, lines: int, now: datetime) -> None:
        for listener in list(self._read_listeners):
            try:
                listener(path, from_line, lines, now)
            except Exception as exc:  # grounding signals must never break a read
                log.warning("mdrecall: read listener failed: %s", exc)

    def _run_close_hooks(self) -> None:
        for hook in self._close_hooks:
            try:
                hook()
            except Exception as exc:
                log.warning("mdrecall: close hook failed: %s", exc)

    # -- search -----------------------------------------------------------------------------------
    def search(self, query: str | SearchRequest, **options: Unpack[SearchOptions]) -> SearchResponse:
        """Search memory: a :class:`~mdrecall.types.SearchRequest`, or a query and its options."""
        return self.run_search(SearchRequest.of(query, **options))

    def run_search(self, request: SearchRequest) -> SearchResponse:
        """The backend's search. Not abstract only so that a backend written before
        :class:`SearchRequest`, which overrides :meth:`search` itself, still opens."""
        raise NotImplementedError(f"{type(self).__name__} implements neither run_search(request) nor search(...)")

    # -- the backend's part -----------------------------------------------------------------------

    @abstractmethod
    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult: ...

    @abstractmethod
    def status(self) -> Status: ...

    @abstractmethod
    def sync(self, force: bool = False, progress: ProgressCallback | None = None) -> SyncReport: ...

    @abstractmethod
    def probe_embedding_availability(self) -> ProbeResult: ...

    @abstractmethod
    def probe_vector_availability(self) -> bool: ...

    @abstractmethod
    def close(self) -> None: ...

    # -- context manager and asyncio --------------------------------------------------------------

    def __enter__(self) -> ManagerBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def asearch(self, query: str | SearchRequest, **options: Unpack[SearchOptions]) -> SearchResponse:
        import asyncio  # only the async API needs it (~10 ms at start otherwise)

        # Through search_memory: a subclass written before SearchRequest or ``as_of`` keeps working.
        return await asyncio.to_thread(search_memory, self, SearchRequest.of(query, **options))

    async def aread_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        import asyncio  # only the async API needs it (~10 ms at start otherwise)

        return await asyncio.to_thread(self.read_file, rel_path, from_line, lines)

    async def async_sync(self, force: bool = False, progress: ProgressCallback | None = None) -> SyncReport:
        import asyncio  # only the async API needs it (~10 ms at start otherwise)

        return await asyncio.to_thread(self.sync, force, progress)

    async def astatus(self) -> Status:
        import asyncio  # only the async API needs it (~10 ms at start otherwise)

        return await asyncio.to_thread(self.status)
