"""Dreaming as a plugin: recall tracking on every opened manager, forgetting what a backend deleted,
and the promote/dream commands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mdrecall.plugins import hookimpl

if TYPE_CHECKING:
    import click

    from mdrecall.contract import MemorySearchManager


@hookimpl
def manager_opened(manager: MemorySearchManager) -> None:
    from mdrecall.dreaming.recording import install_recall_tracking

    install_recall_tracking(manager)


@hookimpl
def entries_forgotten(manager: MemorySearchManager, paths: Sequence[str]) -> None:
    from mdrecall.dreaming.forgetting import forget_paths

    manager.flush()  # recalls still queued for recording would bring the text back
    forget_paths(manager.workspace, manager.config, paths)


@hookimpl
def register_commands(cli: click.Group) -> None:
    from mdrecall.cli.dreaming import dream, promote

    cli.add_command(promote)
    cli.add_command(dream)
