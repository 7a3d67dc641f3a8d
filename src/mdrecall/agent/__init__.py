"""How agents meet mdrecall: tools, prompt sections, the memory flush and the plugin capability."""

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
