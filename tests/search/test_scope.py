"""Scope: the SQL filter, the row mask and ``allows`` must agree on every row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdrecall.search.scope import Scope, as_scope
from mdrecall.store.db import ChunkRow, FileRow, IndexDB, StoreOptions

ROWS = [
    ("memory", "MEMORY.md"),
    ("memory", "memory/2026-01-01.md"),
    ("sessions", ".openclaw/sessions/a/transcripts/t.jsonl"),
    ("sessions", ".openclaw/sessions/a_b/transcripts/t.jsonl"),  # "_" is a LIKE wildcard
    ("sessions", ".openclaw/sessions/b/transcripts/t.jsonl"),
    ("sessions", ".openclaw/sessions/a%/transcripts/t.jsonl"),
]
SCOPES = [
    Scope(),
    Scope(("memory",)),
    Scope(("sessions",)),
    Scope(None, ""),
    Scope(None, ".openclaw/sessions/a/transcripts/"),
    Scope(("sessions",), ".openclaw/sessions/a_b/transcripts/"),
    Scope(("memory", "sessions"), ".openclaw/sessions/a%/transcripts/"),
]


@pytest.mark.parametrize("scope", SCOPES)
def test_sql_mask_and_allows_agree(tmp_path: Path, scope: Scope) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions(vector_enabled=False))
    try:
        for i, (source, path) in enumerate(ROWS):
            db.replace_file(FileRow(path, source, f"h{i}", 1, 1), [ChunkRow(f"id{i}", path, source, 1, 1, f"h{i}", "x", None, "x")], "m")
        clause, args = scope.sql()
        in_sql = {r[0] for r in db.conn.execute(f"SELECT c.path FROM chunks c WHERE 1=1{clause}", args)}
    finally:
        db.close()
    expected = {path for source, path in ROWS if scope.allows(source, path)}
    assert in_sql == expected
    mask = scope.mask(np.array([s for s, _ in ROWS], dtype=object), [p for _, p in ROWS])
    in_mask = {ROWS[i][1] for i in range(len(ROWS))} if mask is None else {ROWS[i][1] for i in np.flatnonzero(mask)}
    assert in_mask == expected


def test_own_prefix_sees_only_that_session() -> None:
    scope = Scope(None, ".openclaw/sessions/a/transcripts/")
    assert scope.allows("memory", "memory/x.md")
    assert scope.allows("sessions", ".openclaw/sessions/a/transcripts/t.jsonl")
    assert not scope.allows("sessions", ".openclaw/sessions/ab/transcripts/t.jsonl")
    assert not Scope(None, "").allows("sessions", ".openclaw/sessions/a/transcripts/t.jsonl")
    assert as_scope(["memory"]) == Scope(("memory",)) and as_scope(None) == Scope() and as_scope([]) == Scope()
