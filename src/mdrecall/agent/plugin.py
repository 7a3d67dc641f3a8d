"""``MemoryCapability``: everything an agent host needs from mdrecall, in one object.

The Python counterpart of OpenClaw's memory plugin entry (``kind: "memory"`` registering a prompt
builder, a flush-plan resolver, a runtime and the memory tools)::

    from mdrecall.agent import create_memory_capability

    with create_memory_capability("~/agent-workspace", {"provider": "local"}) as memory:
        system_prompt = base_prompt + "\\n\\n" + memory.system_prompt_section()
        tools = memory.openai_tools()                   # or memory.tools.specs() for other formats
        result = memory.call_tool("memory_search", {"query": "deploy rules"})
        plan = memory.flush_plan()                      # prompts for the pre-compaction flush
        block = memory.recall("user's new message")     # optional <relevant-memories> auto-recall

Backends (``config.backend``), embedding providers and extra tools come from plugins
(:mod:`mdrecall.plugins`), so a third-party package can swap or add any of them without any change
here: the runtime just calls ``open_manager``, and the tools offered are the standard three plus
those registered for the configured backend. ``auto_recall`` and ``auto_capture`` are the host's
lifecycle calls (OpenClaw's ``before_prompt_build`` and ``agent_end``), answered by the plugins'
``auto_recall``/``auto_capture`` hooks (LanceDB's long-term memory).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from mdrecall import plugins
from mdrecall.agent.flush import FlushPlan, FlushSettings, build_flush_plan
from mdrecall.agent.prompts import build_memory_prompt_section, format_relevant_memories
from mdrecall.agent.tools import MemoryTools
from mdrecall.backends import open_manager
from mdrecall.config import CitationsMode, MemoryConfig, load_config
from mdrecall.contract import MemorySearchManager, search_memory
from mdrecall.types import SearchRequest

ManagerOpener = Callable[[Path, Mapping[str, Any] | None], MemorySearchManager]


def _default_opener(workspace: Path, config: Mapping[str, Any] | None) -> MemorySearchManager:
    return open_manager(workspace, config=dict(config) if config else None)


class MemoryRuntime:
    """Opens the workspace's manager on first use, keeps it open (model warm), closes it once.

    Thread-safe: concurrent first calls open one manager. If opening fails the error propagates (the
    tools turn it into ``disabled: true``) and the next call tries again.
    """

    def __init__(
        self,
        workspace: str | Path,
        config: Mapping[str, Any] | None = None,
        *,
        opener: ManagerOpener | None = None,
    ) -> None:
        self.workspace = Path(workspace).expanduser().resolve()
        self.overrides = dict(config) if config else None
        self._opener = opener or _default_opener
        self._manager: MemorySearchManager | None = None
        self._config: MemoryConfig | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def config(self) -> MemoryConfig:
        """The resolved config (the open manager's, else loaded from files + overrides without opening)."""
        if self._manager is not None:
            return self._manager.config
        if self._config is None:
            self._config = load_config(self.workspace, self.overrides)
        return self._config

    @property
    def is_open(self) -> bool:
        return self._manager is not None

    def manager(self) -> MemorySearchManager:
        if self._manager is not None:
            return self._manager
        with self._lock:
            if self._closed:
                raise RuntimeError("the memory runtime is closed")
            if self._manager is None:
                self._manager = self._opener(self.workspace, self.overrides)
            return self._manager

    __call__ = manager

    def close(self) -> None:
        with self._lock:
            self._closed = True
            manager, self._manager = self._manager, None
        if manager is not None:
            manager.close()


@dataclass
class MemoryCapability:
    """Prompt builder, flush-plan resolver, runtime and tools for one workspace."""

    kind: ClassVar[str] = "memory"

    runtime: MemoryRuntime
    tools: MemoryTools
    flush_settings: FlushSettings
    citations: CitationsMode | None = None

    # -- prompt builder

    def prompt_builder(
        self, available_tools: Iterable[str] | None = None, citations_mode: str | None = None
    ) -> list[str]:
        """System-prompt lines for the memory tools the agent actually has (default: this capability's)."""
        tools = list(available_tools) if available_tools is not None else list(self.tools.names)
        mode = citations_mode or self.citations or self.runtime.config.citations
        return build_memory_prompt_section(tools, mode, sessions_indexed="sessions" in self.runtime.config.sources)

    def system_prompt_section(
        self, available_tools: Iterable[str] | None = None, citations_mode: str | None = None
    ) -> str:
        return "\n".join(self.prompt_builder(available_tools, citations_mode))

    # -- flush-plan resolver

    def flush_plan_resolver(self, now: datetime | None = None) -> FlushPlan | None:
        """Today's flush plan (None when the flush is disabled)."""
        return build_flush_plan(self.flush_settings, now=now)

    flush_plan = flush_plan_resolver

    # -- tools

    def openai_tools(self) -> list[dict[str, Any]]:
        return self.tools.openai_tools()

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None, *, session_key: str | None = None) -> dict[str, Any]:
        return self.tools.call(name, arguments, session_key=session_key)

    async def acall_tool(
        self, name: str, arguments: Mapping[str, Any] | None, *, session_key: str | None = None
    ) -> dict[str, Any]:
        return await self.tools.acall(name, arguments, session_key=session_key)

    # -- auto-recall

    def recall(
        self,
        query: str,
        *,
        max_results: int = 3,
        min_score: float = 0.3,
        max_chars: int | None = None,
        session_key: str | None = None,
    ) -> str:
        """A ``<relevant-memories>`` block for ``query`` ("" when nothing relevant, or search fails).

        For hosts that inject memories before the model runs instead of (or besides) relying on the
        model to call ``memory_search``. Failures yield "" so a broken index never blocks a reply.
        """
        if len(query.strip()) < 5:
            return ""
        try:
            key = session_key if session_key is not None else self.tools.session_key
            request = SearchRequest(query, max_results=max_results, min_score=min_score, session_key=key)
            response = search_memory(self.runtime.manager(), request)
        except Exception:
            return ""
        budget = max_chars if max_chars is not None else self.runtime.config.query.maxInjectedChars
        return format_relevant_memories(list(response.results), max_chars=budget)

    # -- the host's lifecycle: before a prompt, after a turn (plugins' auto_recall / auto_capture) ---

    def auto_recall(self, prompt: str, *, session_key: str | None = None) -> str:
        """Before a prompt is built: the block(s) to prepend ("" when no plugin has anything relevant).

        Never raises: a failing plugin is recorded (``mdrecall plugins``) and contributes nothing."""
        key = session_key if session_key is not None else self.tools.session_key
        try:
            manager = self.runtime.manager()
        except Exception:
            return ""  # recall must never block a reply
        blocks = [block for _name, block in plugins.call_each("auto_recall", manager=manager, prompt=prompt, session_key=key)
                  if isinstance(block, str) and block]  # fmt: skip
        return "\n\n".join(blocks)

    def auto_capture(
        self, messages: Sequence[Mapping[str, Any]], *, success: bool = True, session_key: str | None = None
    ) -> dict[str, Any]:
        """After a turn: let the plugins store what it stated durably. Returns the capturing plugin's
        report (``{captured: [...], ...}``, with ``error`` when capturing failed; with several plugins,
        ``captured`` joined and ``reports`` by plugin). Never raises."""
        key = session_key if session_key is not None else self.tools.session_key
        try:
            manager = self.runtime.manager()
        except Exception as exc:
            return {"captured": [], "error": f"{type(exc).__name__}: {exc}"}
        reports = {
            name: dict(report)
            for name, report in plugins.call_each(
                "auto_capture", manager=manager, messages=list(messages), session_key=key, success=success
            )
            if isinstance(report, Mapping)
        }
        if not reports:
            return {"captured": [], "disabled": f"no plugin captures for backend {manager.backend!r}"}
        if len(reports) == 1:
            return next(iter(reports.values()))
        return {"captured": [c for r in reports.values() for c in r.get("captured", [])], "reports": reports}

    # -- lifecycle

    def close(self) -> None:
        self.runtime.close()

    def __enter__(self) -> MemoryCapability:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_memory_capability(
    workspace: str | Path,
    config: Mapping[str, Any] | None = None,
    *,
    session_key: str | None = None,
    citations: CitationsMode | None = None,
    flush: FlushSettings | Mapping[str, Any] | None = None,
    tools: tuple[str, ...] | None = None,
    opener: ManagerOpener | None = None,
) -> MemoryCapability:
    """Build the capability for ``workspace``; nothing is opened until a tool or recall needs it.

    ``config`` is the memory-section mapping passed to ``open_manager``. ``flush`` overrides the
    config's ``flush`` section. ``session_key`` identifies the requesting session (scoping and
    citations); per-call ``session_key=`` arguments win over it. ``tools``: the tool names to offer
    (default: the standard three plus the plugins' tools for the configured backend).
    """
    runtime = MemoryRuntime(workspace, config, opener=opener)
    if isinstance(flush, FlushSettings):
        flush_settings = flush
    else:
        flush_settings = FlushSettings.from_mapping(flush if flush is not None else runtime.config.flush)
    memory_tools = MemoryTools(runtime, session_key=session_key, citations=citations, tools=tools)
    return MemoryCapability(runtime=runtime, tools=memory_tools, flush_settings=flush_settings, citations=citations)
