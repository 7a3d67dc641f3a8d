"""Forgetting in the Postgres store: the agent's rows go, and after VACUUM (FULL, ANALYZE) no file of
the database (heap, TOAST, indexes, statistics) holds a byte of the fact. A real PostgreSQL 18 with
pgvector (tests/pghelpers.py); the server's write-ahead log (pg_wal) is the server's, not looked at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from forgethelpers import NOTE_PATH, TOKEN, TRANSCRIPT_PATH, holding

from mdrecall import open_manager
from mdrecall.forget import forget
from pghelpers import pg_server_or_skip


def _database_dir(admin: Any, name: str) -> Path:
    data = admin.execute("SHOW data_directory").fetchone()[0]
    oid = admin.execute("SELECT oid FROM pg_database WHERE datname = %s", (name,)).fetchone()[0]
    return Path(data) / "base" / str(oid)


@pytest.mark.timeout(240)
def test_postgres_rows_are_deleted_and_their_bytes_vacuumed(fact_ws: Path, counting_provider: Any) -> None:
    pytest.importorskip("psycopg")
    server = pg_server_or_skip()
    db = server.new_database()
    config = {
        "backend": "postgres", "provider": "counting", "sources": ["memory", "sessions"], "sessions": {"visibility": "all"},
        "sync": {"watch": False},
        # memory/ is shared with the team here: the store keeps the note's whole text too (files.content).
        "postgres": {"dsn": db.admin_dsn, "provision": True, "agentId": "alice", "teamId": "core", "sharedFolders": ["memory/"]},
    }  # fmt: skip
    import numpy as np

    with open_manager(fact_ws, config) as manager, db.admin() as admin:
        manager.sync()
        assert any(TOKEN in h.snippet for h in manager.search("vault code").results)
        vectors = [np.asarray(v, dtype=np.float32).tobytes() for (v,) in admin.execute(
            "SELECT embedding::real[] FROM mdrecall.chunks WHERE text ILIKE %s", (f"%{TOKEN}%",))]  # fmt: skip
        assert len(vectors) == 2
        directory = _database_dir(admin, db.name)
        admin.execute("CHECKPOINT")
        before = holding([TOKEN], vectors, directory)
        assert before[repr(TOKEN)] and len([k for k in before if k.startswith("vector")]) == 2  # the scan sees them

        report = forget(manager, TOKEN, yes=True)

        assert report.verified, report.to_dict()
        (pg,) = [s for s in report.stores if s.store == "postgres"]
        assert pg.removed["chunks holding the lines"] == 2
        assert "tables rewritten (VACUUM FULL, ANALYZE)" in pg.notes
        admin.execute("CHECKPOINT")
        assert holding([TOKEN, TOKEN[3:]], vectors, directory) == {}
        # The rest was re-indexed and is found; the private transcript and the team note both.
        assert any("Fly Postgres" in h.snippet for h in manager.search("which database do we use").results)
        paths = {p for (p,) in admin.execute("SELECT DISTINCT path FROM mdrecall.chunks")}
        assert {NOTE_PATH, TRANSCRIPT_PATH} <= paths
        content = admin.execute("SELECT content FROM mdrecall.files WHERE path = %s", (NOTE_PATH,)).fetchone()[0]
        assert "Fly Postgres" in content and TOKEN not in content
