"""Agent tools from plugins (the ``register_tools`` hook, see :mod:`mdrecall.plugins`).

Each plugin tool is a :class:`~mdrecall.agent.specs.ToolSpec` plus a handler, offered for the
backends it names (LanceDB: ``memory_store``, ``memory_recall``, ``memory_forget``) or for all.
:class:`~mdrecall.agent.tools.MemoryTools` offers them next to the standard three, checks their
arguments against their schemas and runs the handler; the MCP server lists them with annotations
from the spec's ``read_only``/``destructive``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mdrecall import plugins
from mdrecall.agent.specs import MEMORY_GET, MEMORY_SEARCH, MEMORY_STATUS, TOOL_SPECS, ToolSpec
from mdrecall.contract import MemorySearchManager

STANDARD_TOOLS: tuple[str, ...] = (MEMORY_SEARCH, MEMORY_GET, MEMORY_STATUS)

#: ``handler(manager, arguments, session_key) -> dict`` (see the ``register_tools`` hookspec).
ToolHandler = Callable[[MemorySearchManager, dict[str, Any], "str | None"], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class PluginTool:
    spec: ToolSpec
    handler: ToolHandler
    #: The backends it is offered for; None: every backend.
    backends: tuple[str, ...] | None = None

    def offered_for(self, backend: str) -> bool:
        return self.backends is None or backend in self.backends


def _overlap(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    return a is None or b is None or bool(set(a) & set(b))


_tools_lock = threading.Lock()
_tools: dict[str, tuple[PluginTool, ...]] = {}
_tools_generation = -1


def plugin_tools() -> dict[str, tuple[PluginTool, ...]]:
    """Every tool the plugins register (``register_tools``), by name; rebuilt when plugins change.

    One name may be registered more than once for disjoint backends (LanceDB's ``memory_forget``
    and another backend's); a standard tool's name, or a name taken for an overlapping set of
    backends, is an error (that plugin's hook fails and is recorded)."""
    global _tools, _tools_generation
    current = plugins.generation()
    with _tools_lock:
        if _tools_generation != current:
            found: dict[str, tuple[PluginTool, ...]] = {}

            def register(spec: ToolSpec, handler: ToolHandler, backends: Sequence[str] | None = None) -> None:
                if not isinstance(spec, ToolSpec) or not callable(handler):
                    raise ValueError(f"invalid tool registration {spec!r}")
                if isinstance(backends, str):
                    raise ValueError("backends must be a sequence of backend names, not a string")
                tool = PluginTool(spec, handler, tuple(backends) if backends is not None else None)
                taken = spec.name in TOOL_SPECS or any(_overlap(t.backends, tool.backends) for t in found.get(spec.name, ()))
                if taken:
                    where = f" for {', '.join(tool.backends)}" if tool.backends else ""
                    raise ValueError(f"tool {spec.name!r} is already registered{where}")
                found[spec.name] = (*found.get(spec.name, ()), tool)

            for _name, _ in plugins.call_each("register_tools", register=register):
                pass
            _tools, _tools_generation = found, current
        return _tools


def find_tool(name: str, backend: str | None) -> PluginTool | None:
    """The plugin tool ``name`` offered for ``backend``; with no backend known, the one offered for
    every backend, else the first registered."""
    tools = plugin_tools().get(name, ())
    if backend is None:
        return next((t for t in tools if t.backends is None), tools[0] if tools else None)
    return next((t for t in tools if t.offered_for(backend)), None)


def plugin_tools_for(backend: str) -> list[PluginTool]:
    """Every plugin tool offered for ``backend``, in registration order."""
    return [tool for name in plugin_tools() if (tool := find_tool(name, backend)) is not None]


def tool_names_for(backend: str) -> tuple[str, ...]:
    """The standard read tools plus every plugin tool offered for ``backend`` (``MemoryTools``'
    default; ``memory_write`` and opt-in plugin tools are named to be offered)."""
    return STANDARD_TOOLS + tuple(tool.spec.name for tool in plugin_tools_for(backend) if not tool.spec.opt_in)
