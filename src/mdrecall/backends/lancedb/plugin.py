"""The LanceDB backend as a plugin (one of ``DEFAULT_PLUGINS``).

* ``register_backends``: ``backend: lancedb``;
* ``register_tools``: ``memory_store``, ``memory_recall``, ``memory_forget`` for that backend;
* ``register_recall_sources``: dreaming reads entries cited ``ltm:<id>``;
* ``auto_recall`` / ``auto_capture``: ``MemoryCapability``'s calls before a prompt and after a turn
  (``lancedb.autoRecall`` / ``lancedb.autoCapture``);
* ``register_commands``: ``mdrecall ltm ...``.

Imports nothing heavy: every mdrecall command loads this module; LanceDB and PyArrow load with a
manager.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mdrecall.plugins import hookimpl

if TYPE_CHECKING:
    import click

    from mdrecall.backends.lancedb.manager import LanceMemoryManager
    from mdrecall.contract import MemorySearchManager

log = logging.getLogger("mdrecall.lancedb")

BACKEND = "lancedb"


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    from mdrecall.backends.lancedb import create_manager

    register(BACKEND, create_manager)


@hookimpl
def register_tools(register: Callable[..., None]) -> None:
    from mdrecall.agent.specs import ToolSpec
    from mdrecall.backends.lancedb.tools import TOOLS

    for tool in TOOLS:
        spec = ToolSpec(tool.name, tool.description, tool.schema, read_only=tool.read_only, destructive=tool.destructive)
        register(spec, tool.handler, backends=(BACKEND,))


@hookimpl
def register_recall_sources(register: Callable[..., None]) -> None:
    from mdrecall.backends.lancedb.recall_source import read_entry_text

    register("ltm", read_entry_text)


def _lance(manager: MemorySearchManager) -> LanceMemoryManager | None:
    if manager.backend != BACKEND:
        return None
    from mdrecall.backends.lancedb.manager import LanceMemoryManager

    return manager if isinstance(manager, LanceMemoryManager) else None


@hookimpl
def auto_recall(manager: MemorySearchManager, prompt: str, session_key: str | None) -> str | None:
    """The ``<relevant-memories>`` block for ``prompt`` (None when nothing scores above the cutoff)."""
    from mdrecall.agent.prompts import format_relevant_memories

    lance = _lance(manager)
    if lance is None or not lance.settings.autoRecall:
        return None
    try:
        memories = lance.recall_memories(prompt, session_key=session_key)
        return format_relevant_memories(memories, max_chars=lance.settings.recallMaxChars) or None
    except Exception as exc:  # a failing store or model must never block a reply
        log.warning("lancedb auto-recall failed: %s: %s", type(exc).__name__, exc)
        return None


@hookimpl
def auto_capture(
    manager: MemorySearchManager, messages: Sequence[Mapping[str, Any]], session_key: str | None, success: bool
) -> dict[str, Any] | None:
    lance = _lance(manager)
    if lance is None:
        return None
    try:
        return lance.capture_turn(messages, session_key=session_key, success=success)
    except Exception as exc:  # reported to the host, which must not fail its turn for it
        return {"captured": [], "error": f"{type(exc).__name__}: {exc}"}


@hookimpl
def register_commands(cli: click.Group) -> None:
    from mdrecall.backends.lancedb.cli import ltm

    cli.add_command(ltm)
