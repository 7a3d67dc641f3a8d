"""Fixtures of the Postgres tests: the session's one real PostgreSQL 18 (tests/pghelpers.py) and a
fresh database per test, with the schema migrated and agents registered as real login roles (the
deployment model: every agent logs in as its own role and row-level security decides what it sees).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pghelpers import PgDatabase, PgServer, pg_server_or_skip


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    return pg_server_or_skip()


@pytest.fixture
def new_database(pg_server: PgServer) -> Callable[[], PgDatabase]:
    """``new_database()`` -> a fresh database with the schema migrated."""
    return pg_server.new_database


@pytest.fixture
def pg_db(new_database: Callable[[], PgDatabase]) -> PgDatabase:
    return new_database()
