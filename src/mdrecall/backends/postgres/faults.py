"""A failing Postgres server, said in one line: psycopg's errors turned into :class:`PgFault`.

What each fault means to the person running mdrecall (docs/reliability.md, "Postgres under
faults"): the server cannot be reached, a connection was lost (a restart, ``pg_terminate_backend``),
a statement ran past ``statement_timeout``, the server's disk is full, the store is read-only (a
standby, ``default_transaction_read_only``). The message names where the store is (the DSN without
its password) and never carries a traceback; the psycopg error stays the ``__cause__`` for
``MDRECALL_DEBUG``.
"""

from __future__ import annotations

import logging
from typing import Literal

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from mdrecall.errors import StoreError

FaultKind = Literal["unreachable", "lost", "timeout", "disk_full", "read_only", "refused", "busy", "other"]

# psycopg and its pool log what they recover from (a failed rollback on a dead connection, each
# failed reconnection attempt) as warnings. With no logging configured Python prints those on stderr
# (its last-resort handler): nine lines of pool noise before the one line that says what happened.
# A NullHandler keeps them off stderr while still passing them to handlers an application installs.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

#: SQLSTATEs of a session the server ended: shutdown or restart (57P01, 57P02), still starting or
#: stopping (57P03), the session killed for idling (57P05).
_ENDED = frozenset({"57P01", "57P02", "57P03", "57P05"})


class PgFault(StoreError):
    """A Postgres store that failed for a reason outside mdrecall; ``kind`` says which."""

    def __init__(self, kind: FaultKind, message: str) -> None:
        super().__init__(message)
        self.kind: FaultKind = kind


def first_line(exc: BaseException) -> str:
    """The first line of an error's text (libpq adds hints on further lines)."""
    text = str(exc).strip().removeprefix("connection is bad: ")  # psycopg's wrapper of libpq's own text
    return text.split("\n", 1)[0].strip() or type(exc).__name__


def connection_lost(exc: BaseException, conn: psycopg.Connection[object] | None = None) -> bool:
    """True when ``exc`` means the session is gone (its connection cannot be used again)."""
    if conn is not None and conn.broken:
        return True
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        # No SQLSTATE: libpq's own failure (server closed the connection, consuming input failed,
        # the connection is closed); class 08: connection exceptions.
        return state is None or state.startswith("08") or state in _ENDED
    return isinstance(exc, psycopg.InterfaceError) and "closed" in str(exc)


def fault_of(exc: BaseException, where: str | None, statement_timeout_ms: int) -> PgFault | None:
    """A clear :class:`PgFault` for a failure of the store, or None for anything else."""
    at = f" at {where}" if where else ""
    if isinstance(exc, PgFault):
        return exc
    if isinstance(exc, PoolTimeout):
        return PgFault("busy", f"no connection to the Postgres store{at} came free in time ({first_line(exc)}): "
                               "raise postgres.poolMax, or look for sessions holding connections")
    if isinstance(exc, pg_errors.QueryCanceled):
        if "statement timeout" not in str(exc):
            return PgFault("timeout", f"a statement on the Postgres store{at} was canceled ({first_line(exc)})")
        return PgFault("timeout", f"a statement on the Postgres store{at} ran past postgres.statementTimeoutMs "
                                  f"({statement_timeout_ms} ms): another session holds a lock it needs, or the "
                                  "server is overloaded")
    if isinstance(exc, pg_errors.LockNotAvailable):
        return PgFault("timeout", f"the Postgres store{at} gave up waiting for a lock ({first_line(exc)})")
    if isinstance(exc, pg_errors.DiskFull):
        return PgFault("disk_full", f"the Postgres server{at} is out of disk space ({first_line(exc)})")
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return read_only(where)
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return PgFault("refused", f"the Postgres store refused: {first_line(exc)}")
    if connection_lost(exc):
        return PgFault("lost", f"the connection to the Postgres store{at} was lost ({first_line(exc)}): "
                               "the server restarted or the connection was cut")
    return None


def read_only(where: str | None) -> PgFault:
    """The store takes no writes (a standby, or ``default_transaction_read_only``)."""
    at = f" at {where}" if where else ""
    return PgFault("read_only", f"the Postgres store{at} is read-only (a standby, or default_transaction_read_only "
                                "is on): it answers searches but takes no writes")


def unreachable(exc: BaseException, where: str | None) -> PgFault:
    """The server could not be connected to at all."""
    at = f" at {where}" if where else ""
    return PgFault("unreachable", f"cannot reach the Postgres store{at}: {first_line(exc)}")


__all__ = ["FaultKind", "PgFault", "connection_lost", "fault_of", "first_line", "read_only", "unreachable"]
