"""The Postgres backend as a plugin: ``backend: postgres``, and its commands (``migrate-store``,
``postgres migrate``, ``postgres add-agent``). Imports nothing heavy: psycopg loads with a manager."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mdrecall.plugins import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    from mdrecall.backends.postgres import create_manager

    register("postgres", create_manager)


@hookimpl
def register_commands(cli: click.Group) -> None:
    from mdrecall.backends.postgres.cli import COMMANDS

    for command in COMMANDS:
        cli.add_command(command)
