"""The builtin SQLite engine, registered as a backend like any plugin's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.contract import MemorySearchManager
from mdrecall.plugins import hookimpl


def create_manager(workspace: Path, config: MemoryConfig) -> MemorySearchManager:
    from mdrecall.builtin.manager import BuiltinMemoryManager

    manager = BuiltinMemoryManager(workspace, config)
    manager.start_background()
    return manager


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    register("builtin", create_manager)
