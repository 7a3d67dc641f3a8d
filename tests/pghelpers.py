"""Helpers for the Postgres tests (the fixtures are in conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from mdrecall.backends.postgres import schema


@dataclass
class PgServer:
    uri: str  # the superuser's URI on the server's socket

    def dsn(self, database: str, role: str = "postgres") -> str:
        base, _, query = self.uri.partition("?")
        prefix = base.rsplit("/", 1)[0].replace("postgres:@", f"{role}:@", 1)
        return f"{prefix}/{database}?{query}"


@dataclass
class PgDatabase:
    server: PgServer
    name: str

    @property
    def admin_dsn(self) -> str:
        return self.server.dsn(self.name)

    def add_agent(self, agent: str, team: str) -> str:
        """Register an agent; returns the DSN of its own login role."""
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            role = schema.add_agent(conn, agent, team)
        return self.server.dsn(self.name, role)

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.admin_dsn, autocommit=True)


def pg_config(dsn: str, agent: str | None = None, team: str | None = None, **extra: Any) -> dict[str, Any]:
    """A memory-config mapping for ``backend: postgres`` (provider none and no watcher unless given)."""
    postgres: dict[str, Any] = {"dsn": dsn, "poolMin": 1, "poolMax": 2}
    if agent:
        postgres["agentId"] = agent
    if team:
        postgres["teamId"] = team
    postgres.update(extra.pop("postgres", {}))
    config: dict[str, Any] = {"backend": "postgres", "provider": "none", "sync": {"watch": False}, "postgres": postgres}
    config.update(extra)
    return config
