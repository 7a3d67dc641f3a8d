"""Typed reads over apsw. apsw types every value as SQLite's union (int, float, str, bytes, None);
the caller knows its columns, so these hand rows back as ``Any`` in one place instead of a cast at
every query."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

#: One result row; its columns are what the query selected.
Row = tuple[Any, ...]


def rows(conn: apsw.Connection, sql: str, args: Sequence[Any] = ()) -> list[Row]:
    return conn.execute(sql, tuple(args)).fetchall()


def first(conn: apsw.Connection, sql: str, args: Sequence[Any] = ()) -> Row | None:
    """The first row, or None when there is none."""
    row: Row | None = conn.execute(sql, tuple(args)).fetchone()
    return row


def scalar(conn: apsw.Connection, sql: str, args: Sequence[Any] = ()) -> Any:
    """The first column of the first row; None when there is no row (``COUNT(*)``, ``PRAGMA x``
    and the like always have one)."""
    row = first(conn, sql, args)
    return None if row is None else row[0]


__all__ = ["Row", "first", "rows", "scalar"]
