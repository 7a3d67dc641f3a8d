"""The plugin module the entry point names: it registers the backend under the name ``notes``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mdrecall import MemoryConfig, MemorySearchManager
from mdrecall.plugins import hookimpl


def create_manager(workspace: Path, config: MemoryConfig) -> MemorySearchManager:
    from mdrecall_notes_backend.manager import NotesManager

    return NotesManager(workspace, config)


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    register("notes", create_manager)
