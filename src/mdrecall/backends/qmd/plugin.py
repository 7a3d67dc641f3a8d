"""QMD registered as a backend like any plugin's (``backend: qmd``). Imports nothing heavy: the
manager loads only when a workspace selects it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.contract import MemorySearchManager
from mdrecall.plugins import hookimpl


def create_manager(workspace: Path, config: MemoryConfig) -> MemorySearchManager:
    from mdrecall.backends.qmd.manager import QmdMemoryManager

    manager = QmdMemoryManager(workspace, config)
    manager.start_background()
    return manager


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    register("qmd", create_manager)
