"""Click commands of the Postgres backend, added to ``mdrecall`` by its plugin (plugin.py).

* ``mdrecall migrate-store -w WS [-c KEY=VALUE] [--from INDEX.sqlite] [--json]``: copy the workspace's
  builtin SQLite index into its Postgres store, without re-embedding.
* ``mdrecall postgres migrate --dsn OWNER_DSN``: create or upgrade the store's schema.
* ``mdrecall postgres add-agent AGENT --team TEAM --dsn OWNER_DSN [--role NAME] [--password-env VAR]``:
  register an agent and create its login role.

Exit codes: 0 success, 1 failed, 2 bad usage or configuration.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from mdrecall.errors import ConfigError, MdrecallError


def _emit(data: dict[str, Any], as_json: bool, text: str) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True) if as_json else text)


def _fail(exc: BaseException, code: int) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(code)


@click.command("migrate-store")
@click.option("-w", "--workspace", default=".", type=click.Path(file_okay=False), help="The agent's workspace.")
@click.option("-c", "--config", "overrides", multiple=True, metavar="KEY=VALUE", help="Config override (repeatable).")
@click.option("--from", "source", type=click.Path(dir_okay=False), default=None,
              help="The SQLite index to copy (default: the workspace's store.path or default index).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def migrate_store(workspace: str, overrides: tuple[str, ...], source: str | None, as_json: bool) -> None:
    """Copy a builtin SQLite index into the Postgres store (backend: postgres), without re-embedding."""
    from mdrecall.cli.options import parse_overrides
    from mdrecall.config import load_config
    from mdrecall.store import default_store_path

    try:
        root = Path(workspace).expanduser().resolve()
        if not root.is_dir():
            raise ConfigError(f"workspace {root} is not a directory")
        config = load_config(root, parse_overrides(list(overrides)))
        sqlite_path = Path(source).expanduser() if source else (
            Path(config.store.path).expanduser() if config.store.path else default_store_path(root))
        from mdrecall.backends.postgres import _require

        _require()
        from mdrecall.backends.postgres.manager import PostgresMemoryManager
        from mdrecall.backends.postgres.migrate import migrate_sqlite
    except ConfigError as exc:
        _fail(exc, 2)
    try:
        manager = PostgresMemoryManager(root, config)
    except ConfigError as exc:
        _fail(exc, 2)
    except MdrecallError as exc:
        _fail(exc, 1)
    try:
        report = migrate_sqlite(sqlite_path, manager.store, root, manager.desired_meta(),
                                lock_timeout=manager.settings.lockTimeoutMs / 1000.0)
    except MdrecallError as exc:
        _fail(exc, 1)
    finally:
        manager.close()
    data = report.to_dict()
    _emit(data, as_json, f"copied {report.files} files, {report.chunks} chunks ({report.vectors} vectors), "
                         f"{report.cache_entries} cache entries from {sqlite_path} in {report.seconds:.1f} s")


@click.group("postgres")
def postgres() -> None:
    """Administer a Postgres store (run with the store owner's DSN)."""


def _owner_connection(dsn: str | None) -> Any:
    from mdrecall.backends.postgres import _require

    _require()
    import psycopg

    dsn = dsn or os.environ.get("MDRECALL_POSTGRES_DSN")
    if not dsn:
        raise ConfigError("give --dsn (or MDRECALL_POSTGRES_DSN): the store owner's connection string")
    try:
        return psycopg.connect(dsn, autocommit=True, application_name="mdrecall-admin")
    except psycopg.Error as exc:
        raise MdrecallError(f"cannot connect: {exc}") from exc


@postgres.command("migrate")
@click.option("--dsn", default=None, help="The store owner's DSN (default: $MDRECALL_POSTGRES_DSN).")
@click.option("--json", "as_json", is_flag=True)
def migrate_command(dsn: str | None, as_json: bool) -> None:
    """Create or upgrade the mdrecall schema (forward-only, versioned)."""
    from mdrecall.backends.postgres import schema

    try:
        with _owner_connection(dsn) as conn:
            applied = schema.migrate(conn)
            level = schema.current_version(conn)
    except ConfigError as exc:
        _fail(exc, 2)
    except Exception as exc:
        _fail(exc, 1)
    _emit({"applied": applied, "version": level}, as_json,
          f"schema at version {level}" + (f" (applied {', '.join(map(str, applied))})" if applied else " (up to date)"))


@postgres.command("add-agent")
@click.argument("agent")
@click.option("--team", required=True, help="The agent's team.")
@click.option("--dsn", default=None, help="The store owner's DSN (default: $MDRECALL_POSTGRES_DSN).")
@click.option("--role", default=None, help="Role name (default: derived from team and agent).")
@click.option("--password-env", default=None, metavar="VAR", help="Set the role's password from this variable.")
@click.option("--json", "as_json", is_flag=True)
def add_agent_command(agent: str, team: str, dsn: str | None, role: str | None, password_env: str | None,
                      as_json: bool) -> None:
    """Register AGENT of TEAM and create its login role; the agent's postgres.dsn logs in as it."""
    from mdrecall.backends.postgres import schema

    try:
        password = None
        if password_env:
            password = os.environ.get(password_env)
            if not password:
                raise ConfigError(f"${password_env} is empty")
        with _owner_connection(dsn) as conn:
            schema.check_version(conn)
            name = schema.add_agent(conn, agent, team, role=role, password=password)
    except ConfigError as exc:
        _fail(exc, 2)
    except Exception as exc:
        _fail(exc, 1)
    _emit({"agent": agent, "team": team, "role": name}, as_json, f"agent {agent!r} of team {team!r}: role {name}")


COMMANDS = [migrate_store, postgres]

__all__ = ["COMMANDS", "migrate_store", "postgres"]
