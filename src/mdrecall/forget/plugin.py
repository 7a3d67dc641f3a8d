"""Forgetting as a plugin (one of ``DEFAULT_PLUGINS``): the ``memory_forget_lines`` agent tool, for
every backend. It deletes what the person wrote, so it is opt-in for agent hosts (named in
``MemoryTools(tools=...)``, like memory_write) and served by ``mdrecall mcp`` unless ``--read-only``,
marked destructive (clients ask before running it). The ``mdrecall forget`` command is a built-in
command (``mdrecall.cli.forget``)."""

from __future__ import annotations

from collections.abc import Callable

from mdrecall.plugins import hookimpl


@hookimpl
def register_tools(register: Callable[..., None]) -> None:
    from mdrecall.agent.specs import ToolSpec
    from mdrecall.forget.tools import DESCRIPTION, MEMORY_FORGET_LINES, SCHEMA, memory_forget_lines

    spec = ToolSpec(MEMORY_FORGET_LINES, DESCRIPTION, SCHEMA, read_only=False, destructive=True, opt_in=True)
    register(spec, memory_forget_lines)
