"""Facts that change as a plugin (one of ``DEFAULT_PLUGINS``): ``register_tools`` adds
``memory_history`` for the backends over Markdown files, whose statements carry dates (a LanceDB
entry's history would be a list of undated entries; a host may still name the tool explicitly)."""

from __future__ import annotations

from collections.abc import Callable

from mdrecall.plugins import hookimpl

#: The backends whose memory is the workspace's Markdown files (and transcripts).
MARKDOWN_BACKENDS = ("builtin", "postgres", "qmd")


@hookimpl
def register_tools(register: Callable[..., None]) -> None:
    from mdrecall.agent.specs import ToolSpec
    from mdrecall.facts.tools import DESCRIPTION, MEMORY_HISTORY, SCHEMA, memory_history

    register(ToolSpec(MEMORY_HISTORY, DESCRIPTION, SCHEMA, read_only=True), memory_history, backends=MARKDOWN_BACKENDS)
