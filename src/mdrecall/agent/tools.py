"""The agent tools ``memory_search``, ``memory_get`` and ``memory_status``: JSON schemas and handlers.

Handlers take the tool-call arguments as a mapping (what an LLM sends) and always return a
JSON-serialisable dict, never raise for bad input or a broken backend: a model can read an error and
act on it, but cannot recover from an exception in the host. The shapes:

- ``memory_search {query, maxResults?, minScore?, corpus?, asOf?}`` ->
  ``{results: [{path, startLine, endLine, score, snippet, source, citation, supersededBy?}], provider, model, mode,
  citations, degraded, warnings, stale, freshness}``, plus ``reason`` when nothing came back; when
  search is impossible ``{results: [], disabled: true, unavailable: true, error, warning, action}``.
- ``memory_get {path, from?, lines?}`` -> ``{text, path, from, lines, truncated?, nextFrom?, lineCut?}``
  (``path`` may be a search citation, ``memory/a.md#L3-L7``); on a
  refused path ``{path, text: "", error, code, hint}`` with ``code`` one of ``not_memory_path``,
  ``outside_workspace``, ``not_found``, ``invalid_path``.
- ``memory_status {}`` -> the manager's status.
- ``memory_write {text, target?}`` -> ``{path, startLine, endLine, citation, text, redacted, created,
  indexed}`` (the entry appended to today's daily note or ``target``, re-indexed at once); on a refused
  target ``{error, code, hint}`` with the ``memory_get`` codes. Not in the default tool set: a host
  opts in with ``tools=(..., MEMORY_WRITE)`` (``mdrecall mcp`` does, unless ``--read-only``).

Plugins add tools through the ``register_tools`` hook (:func:`plugin_tools`): each is offered for
the backends it names (LanceDB: ``memory_store``, ``memory_recall``, ``memory_forget``), with its
arguments checked against its schema (:func:`mdrecall.agent.arguments.parse_arguments`) before
its handler runs.

The session key (who is asking) comes from the host, never from the model: it is a constructor
argument or a per-call keyword, not a schema property, so a model cannot widen its own scope.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime
from pathlib import PurePath
from typing import Any, Literal, Protocol, runtime_checkable

from mdrecall.agent.arguments import (
    ToolInputError,
    check_known,
    parse_arguments,
    parse_as_of_arg,
    parse_get_args,
    parse_search_args,
    parse_write_args,
)
from mdrecall.agent.registry import STANDARD_TOOLS, find_tool, plugin_tools, tool_names_for
from mdrecall.agent.specs import (
    MEMORY_GET,
    MEMORY_SEARCH,
    MEMORY_STATUS,
    MEMORY_STATUS_SCHEMA,
    MEMORY_WRITE,
    TOOL_SPECS,
    ToolSpec,
)
from mdrecall.config import CitationsMode, MemoryConfig
from mdrecall.contract import MemorySearchManager, search_memory
from mdrecall.errors import ConfigError, EmbeddingError, PathError, ProviderUnavailableError, StoreError
from mdrecall.types import SearchRequest, format_citation

# Argument parsing moved to agent/arguments.py; re-exported for callers that imported it from here.
__all__ = [
    "ConfigSource",
    "MemoryTools",
    "ToolInputError",
    "build_tools",
    "chat_type_from_session_key",
    "citations_enabled",
    "jsonable",
    "parse_get_args",
    "parse_search_args",
    "parse_write_args",
    "unavailable_result",
]


# --- citations -------------------------------------------------------------------------------------


def chat_type_from_session_key(session_key: str | None) -> Literal["direct", "group", "channel"]:
    """``group``/``channel`` when that token appears in the key (after ``agent:<id>:``), else direct.

    Keys look like ``agent:main:telegram:group:123``; CLI, unknown and missing keys count as direct.
    """
    if not session_key:
        return "direct"
    tokens = [t.strip().lower() for t in session_key.split(":")]
    if len(tokens) >= 2 and tokens[0] == "agent":
        tokens = tokens[2:]
    if "channel" in tokens:
        return "channel"
    if "group" in tokens:
        return "group"
    return "direct"


def citations_enabled(mode: str, session_key: str | None) -> bool:
    if mode == "on":
        return True
    if mode == "off":
        return False
    return chat_type_from_session_key(session_key) == "direct"


# --- results ---------------------------------------------------------------------------------------

_QUOTA_RE = re.compile(r"insufficient_quota|quota|429", re.IGNORECASE)


def unavailable_result(exc: BaseException) -> dict[str, Any]:
    """The ``disabled: true`` answer: what happened (error), what it means (warning), what to do (action)."""
    error = str(exc) or type(exc).__name__
    if _QUOTA_RE.search(error) or (isinstance(exc, EmbeddingError) and exc.status == 429):
        warning = "Memory search is unavailable because the embedding provider quota is exhausted."
        action = "Top up or switch embedding provider, then retry memory_search."
    elif isinstance(exc, ConfigError):
        warning = "Memory search is unavailable because the memory configuration is invalid."
        action = "Fix the mdrecall configuration (the error names the key or file), then retry memory_search."
    elif isinstance(exc, StoreError):
        warning = "Memory search is unavailable because the memory index cannot be opened."
        action = "Check the index location (store.path) and its permissions, or rebuild it with `mdrecall index --force`."
    elif isinstance(exc, ProviderUnavailableError):
        warning = "Memory search is unavailable because the embedding provider cannot be used here."
        action = (
            "Install or configure the embedding provider (the error says what is missing), or set "
            "provider: none for keyword-only search, then retry memory_search."
        )
    else:
        warning = "Memory search is unavailable due to an embedding/provider error."
        action = "Check embedding provider configuration and retry memory_search."
    return {
        "results": [],
        "disabled": True,
        "unavailable": True,
        "error": error,
        "warning": warning,
        "action": action,
    }


_PATH_HINTS = {
    "not_memory_path": (
        "memory_get reads only MEMORY.md, memory/**/*.md and configured extra paths; use a path from "
        "memory_search results."
    ),
    "outside_workspace": "Only memory files inside the workspace (or configured extra paths) can be read.",
    "not_found": "No such memory file; run memory_search to find the right path.",
    "invalid_path": "Pass a workspace-relative path with '/' separators, e.g. memory/2026-01-31.md.",
}
_SESSION_HINT = (
    "Session transcripts cannot be read with memory_get; use memory_search with corpus='sessions' to find "
    "what was said."
)


def jsonable(value: Any) -> Any:
    """Plain JSON types only: dates as ISO strings, paths as strings, NaN/inf as None."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return jsonable(to_dict())
    return str(value)


# --- handlers --------------------------------------------------------------------------------------


def _is_session_path(path: str) -> bool:
    normal = path.replace("\\", "/").strip().lower()
    return normal.endswith(".jsonl") or normal.startswith("sessions/") or "/sessions/" in normal


@runtime_checkable
class ConfigSource(Protocol):
    """A manager factory that knows the config without opening the manager (MemoryRuntime)."""

    @property
    def config(self) -> MemoryConfig: ...

    def __call__(self) -> MemorySearchManager: ...


class MemoryTools:
    """Tool handlers over one manager.

    ``manager`` is either a manager or a zero-argument callable returning one (opened on first use;
    if opening fails, ``memory_search`` answers ``disabled: true`` and the next call tries again).
    ``citations`` overrides the manager config's ``citations`` mode; ``session_key`` is the default
    requester for session scoping and for citations in ``auto`` mode.
    """

    def __init__(
        self,
        manager: MemorySearchManager | Callable[[], MemorySearchManager],
        *,
        session_key: str | None = None,
        citations: CitationsMode | None = None,
        tools: tuple[str, ...] | None = None,
    ) -> None:
        # A manager factory (e.g. MemoryRuntime) is called per use; a plain manager is wrapped.
        backend: str | None
        if isinstance(manager, MemorySearchManager):
            opened = manager
            self._manager_source: Callable[[], MemorySearchManager] = lambda: opened
            backend = manager.backend
        else:
            self._manager_source = manager
            # A runtime knows the backend without opening it; a bare factory would have to open it.
            backend = manager.config.backend if isinstance(manager, ConfigSource) else None
        self.session_key = session_key
        self._citations = citations
        self._backend = backend
        if tools is None:  # the standard tools plus the plugins' tools for this backend
            tools = tool_names_for(backend) if backend is not None else STANDARD_TOOLS
        extra = plugin_tools()
        unknown = [t for t in tools if t not in TOOL_SPECS and t not in extra]
        if unknown:
            raise ValueError(f"unknown memory tool(s): {', '.join(unknown)}")
        self.names = tools

    # -- specs

    def specs(self) -> list[ToolSpec]:
        out = []
        for name in self.names:
            if name in TOOL_SPECS:
                out.append(TOOL_SPECS[name])
                continue
            # A tool named explicitly is listed even for another backend (a call says so); one whose
            # plugin was unregistered since is gone.
            tool = find_tool(name, self._backend) or find_tool(name, None)
            if tool is not None:
                out.append(tool.spec)
        return out

    def openai_tools(self) -> list[dict[str, Any]]:
        return [spec.to_openai() for spec in self.specs()]

    def manager(self) -> MemorySearchManager:
        return self._manager_source()

    def citations_mode(self) -> str:
        if self._citations is not None:
            return self._citations
        try:
            # A runtime knows its config without opening the manager; a bare manager has its own.
            source = self._manager_source
            config = source.config if isinstance(source, ConfigSource) else self.manager().config
            return config.citations
        except Exception:
            return "auto"

    # -- dispatch

    def call(self, name: str, arguments: Mapping[str, Any] | None, *, session_key: str | None = None) -> dict[str, Any]:
        """Run one tool call; unknown tools and bad arguments come back as ``{error}`` dicts."""
        args = arguments or {}
        if name not in self.names:
            return {"error": f"unknown tool {name!r}; available: {', '.join(self.names)}"}
        if name not in TOOL_SPECS:
            return self._call_plugin_tool(name, args, session_key if session_key is not None else self.session_key)
        handler = {MEMORY_SEARCH: self.memory_search, MEMORY_GET: self.memory_get, MEMORY_STATUS: self.memory_status,
                   MEMORY_WRITE: self.memory_write}[name]  # fmt: skip
        return handler(args, session_key=session_key)

    def _call_plugin_tool(self, name: str, args: Mapping[str, Any], session_key: str | None) -> dict[str, Any]:
        if name not in plugin_tools():  # its plugin was unregistered since
            return {"error": f"tool {name!r} is not provided by any plugin now", "code": "unavailable"}
        try:
            manager = self.manager()
        except Exception as exc:
            return unavailable_result(exc)
        tool = find_tool(name, manager.backend)
        if tool is None:
            return {"error": f"{name} is not available with backend {manager.backend!r}", "code": "unsupported_backend"}
        try:
            parsed = parse_arguments(args, tool.spec)
        except ToolInputError as exc:
            return {"error": str(exc), "code": "invalid_arguments"}
        try:
            return tool.handler(manager, parsed, session_key)
        except ValueError as exc:  # the handler's word on arguments that fit the schema but not the store
            return {"error": str(exc), "code": "invalid_arguments"}
        except Exception as exc:  # a broken backend: report, don't crash the turn
            return unavailable_result(exc)

    async def acall(
        self, name: str, arguments: Mapping[str, Any] | None, *, session_key: str | None = None
    ) -> dict[str, Any]:
        """:meth:`call` in a worker thread, so searches and embedding never block the event loop."""
        import asyncio  # only the async API needs it: a one-shot CLI command never imports asyncio

        return await asyncio.to_thread(self.call, name, arguments, session_key=session_key)

    # -- memory_search

    def memory_search(self, args: Mapping[str, Any], *, session_key: str | None = None) -> dict[str, Any]:
        try:
            query, max_results, min_score, corpus = parse_search_args(args)
            as_of = parse_as_of_arg(args)
            explain = args.get("explain", False)
            if not isinstance(explain, bool):
                raise ToolInputError("explain must be true or false")
        except ToolInputError as exc:
            return {"results": [], "error": str(exc), "code": "invalid_arguments"}
        requester = session_key if session_key is not None else self.session_key
        try:
            manager = self.manager()
        except Exception as exc:  # the backend cannot even open: say so instead of failing the turn
            return unavailable_result(exc)

        warnings: list[str] = []
        configured = list(manager.config.sources)
        if corpus == "sessions" and "sessions" not in configured:
            return {
                "results": [],
                "provider": None,
                "model": None,
                "mode": None,
                "citations": self.citations_mode(),
                "degraded": False,
                "warnings": [
                    "Session transcripts are not indexed in this workspace (add 'sessions' to the sources "
                    "setting to search them)."
                ],
                "stale": False,
                "freshness": {},
            }
        sources = {"memory": ["memory"], "sessions": ["sessions"], "all": None}[corpus]
        try:
            request = SearchRequest(query, max_results=max_results, min_score=min_score, session_key=requester,
                                    sources=sources, as_of=as_of)  # fmt: skip
            response = search_memory(manager, request)
        except Exception as exc:
            return unavailable_result(exc)

        mode = self.citations_mode()
        cite = citations_enabled(mode, requester)
        results = []
        for hit in response.results:
            if corpus != "all" and hit.source != corpus:
                continue  # belt and braces: the manager already filtered by source
            citation = hit.citation or format_citation(hit.path, hit.start_line, hit.end_line)
            snippet = hit.snippet.strip()
            if cite:
                snippet = f"{snippet}\n\nSource: {citation}"
            item: dict[str, Any] = {
                "path": hit.path,
                "startLine": hit.start_line,
                "endLine": hit.end_line,
                "score": round(float(hit.score), 4),
                "snippet": snippet,
                "source": hit.source,
                "citation": citation if cite else None,
            }
            if hit.superseded_by:
                item["supersededBy"] = hit.superseded_by
            if explain and hit.explanation:
                item["explanation"] = hit.explanation
            results.append(item)
        warnings.extend(response.warnings)
        out: dict[str, Any] = {
            "results": results,
            "provider": response.provider,
            "model": response.model,
            "mode": response.mode,
            "citations": mode,
            "degraded": bool(response.degraded),
            "warnings": list(warnings),
            "stale": bool(response.stale),
            "freshness": jsonable(response.freshness),
        }
        # Why nothing came back ("nothing relevant": no memory reached minScore). Per-hit explanations
        # only when asked (``explain``): they cost an agent context.
        reason = getattr(response, "reason", None)
        if not results and reason:
            out["reason"] = reason
        return out

    # -- memory_get

    def memory_get(self, args: Mapping[str, Any], *, session_key: str | None = None) -> dict[str, Any]:
        raw_path = args.get("path") if isinstance(args, Mapping) else None
        try:
            path, from_line, lines = parse_get_args(args)
        except ToolInputError as exc:
            return {"path": raw_path if isinstance(raw_path, str) else None, "text": "", "error": str(exc),
                    "code": "invalid_arguments"}  # fmt: skip
        try:
            manager = self.manager()
            result = manager.read_file(path, from_line=from_line, lines=lines)
        except PathError as exc:
            hint = _SESSION_HINT if exc.code == "not_memory_path" and _is_session_path(path) else _PATH_HINTS.get(exc.code)
            return {"path": path, "text": "", "error": str(exc), "code": exc.code, "hint": hint}
        except Exception as exc:  # an unreadable file or broken backend: report, don't crash the turn
            return {"path": path, "text": "", "error": str(exc) or type(exc).__name__, "code": "read_failed",
                    "disabled": True}  # fmt: skip
        out = result.to_dict()
        if result.truncated:
            if out["text"]:
                # Said in the text too: models read text more reliably than sibling fields.
                if "nextFrom" in out:
                    out["text"] += f"\n\n[More content available. Use from={out['nextFrom']} to continue.]"
                elif result.line_cut:
                    # No page can continue inside a line (OpenClaw words it the same way).
                    out["text"] += (
                        "\n\n[More content available. Requested excerpt exceeded the default maxChars budget. "
                        "If you need the full raw line, use read on the source file.]"
                    )
                else:
                    out["text"] += "\n\n[More content available. Requested excerpt exceeded the maxChars budget.]"
        return out

    # -- memory_status

    def memory_status(self, args: Mapping[str, Any] | None = None, *, session_key: str | None = None) -> dict[str, Any]:
        try:
            check_known(args or {}, MEMORY_STATUS_SCHEMA, MEMORY_STATUS)
        except ToolInputError as exc:
            return {"error": str(exc), "code": "invalid_arguments"}
        try:
            status: dict[str, Any] = jsonable(self.manager().status().to_dict())
        except Exception as exc:
            return {"available": False, **unavailable_result(exc)}
        status.setdefault("available", True)
        status["citations"] = self.citations_mode()
        return status


    # -- memory_write

    def memory_write(self, args: Mapping[str, Any], *, session_key: str | None = None) -> dict[str, Any]:
        from mdrecall.sources.remember import RememberError, remember

        try:
            text, target = parse_write_args(args)
        except ToolInputError as exc:
            return {"error": str(exc), "code": "invalid_arguments"}
        try:
            manager = self.manager()
            written = remember(manager.workspace, text, config=manager.config, target=target, via="agent")
        except PathError as exc:
            return {"path": target, "error": str(exc), "code": exc.code,
                    "hint": "memory_write appends to MEMORY.md or memory/**/*.md; omit target for today's daily note."}  # fmt: skip
        except RememberError as exc:
            return {"error": str(exc), "code": "invalid_arguments"}
        except Exception as exc:  # a read-only disk, a broken backend: report, don't crash the turn
            return {"error": str(exc) or type(exc).__name__, "code": "write_failed"}
        out = written.to_dict()
        try:
            manager.sync()  # searchable at once, whatever the watcher is doing
            out["indexed"] = True
        except Exception as exc:  # the note is written; the next search indexes it
            out["indexed"] = False
            out["warning"] = f"written, but not indexed yet: {exc}"
        return out


def build_tools(manager: MemorySearchManager | Callable[[], MemorySearchManager], **kwargs: Any) -> MemoryTools:
    """Shorthand for :class:`MemoryTools`."""
    return MemoryTools(manager, **kwargs)
