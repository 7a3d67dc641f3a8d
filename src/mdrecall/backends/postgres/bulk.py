"""Bulk loading with COPY: ``migrate-store`` and the scale benchmark write chunks this way.

Rows are copied (binary COPY, vectors in pgvector's binary format) into a temporary table, then
inserted into ``chunks`` with their tsvector computed by the server in one statement. Run as an
agent, the agent and team columns take their defaults (the role's identity) and row-level security
checks every row; run as the store owner (the benchmark), they are given explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from mdrecall.backends.postgres.schema import SCHEMA

S = SCHEMA

#: Columns of one chunk row, in the order ``copy_chunks`` expects them.
CHUNK_COLUMNS = ("chunk_id", "path", "source", "start_line", "end_line", "hash", "model", "text", "embedding",
                 "embed_hash", "fts_text", "visibility", "updated_at")
_TYPES = ("text", "text", "text", "int4", "int4", "text", "text", "text", "vector", "text", "text", "text", "int8")


def copy_chunks(conn: Any, rows: Iterable[Sequence[Any]], ts_config: str, *, owners: bool = False) -> int:
    """Copy chunk rows (``CHUNK_COLUMNS``, plus ``agent_id, team_id`` first when ``owners``) into
    ``chunks`` inside the caller's transaction; returns the number of rows inserted."""
    columns = (("agent_id", "team_id") if owners else ()) + CHUNK_COLUMNS
    types = (("text", "text") if owners else ()) + _TYPES
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS mdr_stage_chunks ("
        + ", ".join(f"{c} {t if t != 'vector' else 'vector'}" for c, t in zip(columns, types))
        + ") ON COMMIT DELETE ROWS"
    )
    with conn.cursor() as cur:
        with cur.copy(f"COPY mdr_stage_chunks ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(types))
            for row in rows:
                copy.write_row(row)
        target = [c for c in columns if c != "fts_text"] + ["fts"]
        source = [c for c in columns if c != "fts_text"] + [f"to_tsvector('{ts_config}', fts_text)"]
        cur.execute(
            f"INSERT INTO {S}.chunks ({', '.join(target)}) SELECT {', '.join(source)} FROM mdr_stage_chunks "
            "ON CONFLICT DO NOTHING"
        )
        inserted = cur.rowcount
        cur.execute("TRUNCATE mdr_stage_chunks")
    return inserted


__all__ = ["CHUNK_COLUMNS", "copy_chunks"]
