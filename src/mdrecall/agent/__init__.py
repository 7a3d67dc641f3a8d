"""How agents meet mdrecall: tools, prompt sections, the memory flush and the plugin capability.

The names below load on first use: the CLI validates its arguments with :mod:`mdrecall.agent.tools`
alone and must not pay for the flush, the prompts and the capability on every command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mdrecall.agent.flush import (
        FlushDecision,
        FlushPlan,
        FlushSettings,
        FlushState,
        append_flush_note,
        build_flush_plan,
        should_flush,
    )
    from mdrecall.agent.plugin import MemoryCapability, MemoryRuntime, create_memory_capability
    from mdrecall.agent.prompts import (
        InjectedMemory,
        build_memory_prompt_section,
        build_relevant_memories,
        escape_memory_text,
        format_relevant_memories,
        render_memory_prompt_section,
    )
    from mdrecall.agent.specs import MEMORY_GET, MEMORY_SEARCH, MEMORY_STATUS, TOOL_SPECS, ToolSpec
    from mdrecall.agent.tools import MemoryTools, unavailable_result
    from mdrecall.types import format_citation

#: Public name -> the module that defines it.
_EXPORTS = {
    **dict.fromkeys(
        ["FlushDecision", "FlushPlan", "FlushSettings", "FlushState", "append_flush_note", "build_flush_plan", "should_flush"],
        "mdrecall.agent.flush",
    ),
    **dict.fromkeys(["MemoryCapability", "MemoryRuntime", "create_memory_capability"], "mdrecall.agent.plugin"),
    **dict.fromkeys(
        ["InjectedMemory", "build_memory_prompt_section", "build_relevant_memories", "escape_memory_text",
         "format_relevant_memories", "render_memory_prompt_section"],
        "mdrecall.agent.prompts",
    ),
    **dict.fromkeys(["MEMORY_GET", "MEMORY_SEARCH", "MEMORY_STATUS", "TOOL_SPECS", "ToolSpec"], "mdrecall.agent.specs"),
    **dict.fromkeys(["MemoryTools", "unavailable_result"], "mdrecall.agent.tools"),
    "format_citation": "mdrecall.types",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "FlushDecision",
    "FlushPlan",
    "FlushSettings",
    "FlushState",
    "InjectedMemory",
    "MEMORY_GET",
    "MEMORY_SEARCH",
    "MEMORY_STATUS",
    "MemoryCapability",
    "MemoryRuntime",
    "MemoryTools",
    "TOOL_SPECS",
    "ToolSpec",
    "append_flush_note",
    "build_flush_plan",
    "build_memory_prompt_section",
    "build_relevant_memories",
    "create_memory_capability",
    "escape_memory_text",
    "format_citation",
    "format_relevant_memories",
    "render_memory_prompt_section",
    "should_flush",
    "unavailable_result",
]
