"""This process's connections to the team store: a checked pool, each thread's pinned connection, and
every failure of the server as one clear :class:`~mdrecall.backends.postgres.faults.PgFault`.

* A connection is checked as it leaves the pool (an empty statement, psycopg_pool's own check): one
  that a restart or ``pg_terminate_backend`` killed while it sat idle is replaced, never handed out.
  When the check fails, every idle connection is checked (they died together).
* When the server cannot be reached the caller hears so at once, with libpq's reason, from a direct
  connection attempt (``connect_timeout`` at most) rather than after the pool's whole wait, and keeps
  hearing so at once until a connection attempt succeeds again.
* A lost background reconnection is retried for :data:`RECONNECT_S`, then left to the next demand,
  so a server back after a long outage is used at the next call, not at the end of a long backoff.
* Read-only steps (:meth:`PgConnections.read`) run once more on a fresh connection when theirs dies
  under them; writes never are (a sync fails in one line and the next one carries on).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from mdrecall.backends.postgres.faults import PgFault, fault_of, unreachable
from mdrecall.backends.postgres.settings import PostgresSettings
from mdrecall.backends.postgres.status import redacted_dsn
from mdrecall.errors import StoreError

Connection = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")

#: libpq's connect_timeout (seconds) unless the DSN sets its own: a host that drops packets fails a
#: connection attempt after this long instead of never.
CONNECT_TIMEOUT_S = 10
#: How long the pool retries a lost connection in the background before it waits for demand
#: (psycopg_pool's default is five minutes of ever longer pauses: a server back after a minute
#: would get its connections back only when the current pause ends).
RECONNECT_S = 2.0
#: How long a caller waits for a pooled connection before the server is checked to be reachable.
FIRST_WAIT_S = 1.0


class PgConnections:
    """A pool of connections to one DSN, thread-safe; ``configure`` prepares each new connection."""

    def __init__(self, settings: PostgresSettings, application_name: str,
                 configure: Callable[[Connection], None]) -> None:
        self.settings = settings
        self.where = redacted_dsn(settings.dsn)
        self._configure = configure
        self._local = threading.local()
        self._unreachable = False
        self._wait_s = max(5.0, settings.statementTimeoutMs / 1000.0)
        self._kwargs: dict[str, Any] = {"autocommit": True, "application_name": application_name}
        try:
            if "connect_timeout" not in conninfo_to_dict(settings.dsn or ""):
                self._kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
        except psycopg.ProgrammingError as exc:  # never echo the DSN: it may hold a password
            raise StoreError(f"postgres.dsn is not a valid libpq connection string or URI ({type(exc).__name__})") from None
        self.pool: ConnectionPool[Connection] | None = None

    def connect(self) -> Connection:
        """A connection of its own, outside the pool (not configured); an unreachable server is a
        PgFault at once."""
        try:
            conn = psycopg.connect(self.settings.dsn or "", **self._kwargs)
        except psycopg.OperationalError as exc:
            self._unreachable = True
            raise unreachable(exc, self.where) from exc
        self._unreachable = False
        return conn

    def open(self, name: str) -> None:
        """Open the pool (its ``poolMin`` connections made before this returns)."""
        pool: ConnectionPool[Connection] = ConnectionPool(
            self.settings.dsn or "",
            min_size=self.settings.poolMin,
            max_size=self.settings.poolMax,
            kwargs=self._kwargs,
            configure=self._configure,
            open=False,
            name=name,
            timeout=self._wait_s,
            reconnect_timeout=RECONNECT_S,
        )
        try:
            pool.open(wait=True, timeout=self._wait_s)
        except PoolTimeout as exc:
            pool.close()
            self.connect().close()  # the server went away meanwhile: say that
            raise StoreError(f"cannot open connections to the Postgres store at {self.where}: {exc}") from exc
        self.pool = pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def _open_pool(self) -> ConnectionPool[Connection]:
        if self.pool is None:
            raise StoreError("the Postgres store is not open")
        return self.pool

    def fault(self, exc: BaseException) -> PgFault | None:
        """``exc`` as the one-line PgFault it means, or None for anything else."""
        return fault_of(exc, self.where, self.settings.statementTimeoutMs)

    def _probe(self) -> None:
        """Raise the unreachable PgFault now if the server cannot be connected to."""
        self.connect().close()

    def _getconn(self) -> Connection:
        pool = self._open_pool()
        try:
            return pool.getconn(timeout=min(FIRST_WAIT_S, self._wait_s))
        except PoolTimeout:
            # Every connection is in use, or the pool cannot connect: when the server is down, say so
            # now rather than after the whole wait.
            self._probe()
        try:
            return pool.getconn(timeout=max(0.1, self._wait_s - FIRST_WAIT_S))
        except PoolTimeout as exc:
            raise self.fault(exc) or StoreError(str(exc)) from exc

    def _checkout(self) -> Connection:
        """A pooled connection whose session has just answered."""
        if self._unreachable:  # the server was down at the last attempt: fail at once while it still is
            self._probe()
        pool = self._open_pool()
        for attempt in range(2):
            conn = self._getconn()
            try:
                conn.execute("")  # psycopg_pool's own liveness check: one empty round trip
                return conn
            except psycopg.Error as exc:
                pool.putconn(conn)  # broken: the pool closes it and opens a replacement
                if attempt:
                    raise self.fault(exc) or StoreError(str(exc)) from exc
            # A restart or pg_terminate_backend ended every idle session, not just this one.
            self._probe()
            pool.check()
        raise AssertionError("unreachable")

    def _translated(self, exc: Exception) -> Exception:
        fault = self.fault(exc)
        return exc if fault is None else fault

    @contextmanager
    def pooled(self) -> Iterator[Connection]:
        """A checked connection from the pool for the block (never the thread's pinned one)."""
        pool = self._open_pool()
        conn = self._checkout()
        try:
            # as ConnectionPool.connection(): a transaction left open is rolled back
            with self._errors_said_clearly(), conn:
                yield conn
        finally:
            pool.putconn(conn)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """This thread's pinned connection (inside :meth:`pinned`), else a checked one from the pool."""
        pinned: Connection | None = getattr(self._local, "conn", None)
        if pinned is None:
            with self.pooled() as conn:
                yield conn
            return
        with self._errors_said_clearly():
            yield pinned

    @contextmanager
    def _errors_said_clearly(self) -> Iterator[None]:
        """An error of the block raised as :meth:`_translated` words it (the original as its cause)."""
        try:
            yield
        except Exception as exc:
            clear = self._translated(exc)
            if clear is exc:
                raise
            raise clear from exc

    @contextmanager
    def pinned(self) -> Iterator[Connection]:
        """Route this thread's calls through one connection for the block."""
        pinned: Connection | None = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self.pooled() as conn:
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    def read(self, work: Callable[[Connection], T]) -> T:
        """``work(conn)`` for a read-only step, run once more on a fresh connection when the first one
        died under it (a restart or a terminated session between the check and the statement)."""
        for attempt in range(2):
            try:
                with self.connection() as conn:
                    return work(conn)
            except PgFault as fault:
                if attempt or fault.kind != "lost" or getattr(self._local, "conn", None) is not None:
                    raise
        raise AssertionError("unreachable")

    @contextmanager
    def advisory_lock(self, key: int, timeout: float | None) -> Iterator[bool]:
        """Hold a session-level advisory lock for the block on the thread's pinned connection; False
        when it could not be had within ``timeout`` seconds."""
        with self.pinned() as conn:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                got = bool(row and row[0])
                if got or (deadline is not None and time.monotonic() >= deadline):
                    break
                time.sleep(0.05)
            try:
                yield got
            finally:
                if got:
                    _unlock(conn, key)

    def stats(self) -> dict[str, Any]:
        pool = self._open_pool()
        stats = pool.get_stats()
        return {"min": pool.min_size, "max": pool.max_size, "size": stats.get("pool_size"),
                "available": stats.get("pool_available"), "waiting": stats.get("requests_waiting", 0)}


def _unlock(conn: Connection, key: int) -> None:
    """Release an advisory lock; never raises, so it cannot hide why the block failed. A session that
    is gone took its locks with it; one that cannot unlock is closed, which releases them too (it must
    not go back to the pool still holding the lock)."""
    if conn.broken or conn.closed:
        return
    try:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    except psycopg.Error:
        conn.close()


__all__ = ["CONNECT_TIMEOUT_S", "FIRST_WAIT_S", "RECONNECT_S", "Connection", "PgConnections"]
