"""An index written by the previous schema (2) keeps answering, then is rebuilt from the files by
the first sync without embedding anything again (tests/fixtures/schema2: built by that code)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import apsw
import pytest

from mdrecall import open_manager
from mdrecall.search.vector import stored_vector_search
from mdrecall.store.db import SCHEMA_VERSION, IndexDB, StoreOptions, encode_vector
from mdrecall.types import SearchResponse, SyncProgress

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "schema2"
QUESTIONS = ["which database do we use?", "who fixed the backup?", "谁不喝咖啡？", "Safari support"]

# Scores are calibrated (a question may rightly find nothing relevant in four chunks): the
# migration is judged on the ranked lists, so these searches keep every candidate.

@pytest.fixture()
def legacy(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURE / "workspace", ws)
    db_path = tmp_path / "index.sqlite"
    db_path.write_bytes(gzip.decompress((FIXTURE / "index.sqlite.gz").read_bytes()))
    return ws, db_path


def _config(db_path: Path, **extra: object) -> dict:
    return {"provider": "local", "store": {"path": str(db_path)}, "dreaming": {"enabled": False}, "sync": {"watch": False}, **extra}


def _legacy_vectors(db_path: Path) -> dict[str, bytes]:
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return dict(conn.execute("SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL").fetchall())
    finally:
        conn.close()


def test_schema2_index_answers_then_migrates_without_reembedding(legacy: tuple[Path, Path]) -> None:
    ws, db_path = legacy
    old_vectors = _legacy_vectors(db_path)
    assert len(old_vectors) == 4

    with open_manager(ws, _config(db_path, sync={"watch": False, "onSearch": False})) as m:
        assert "schemaVersion changed (2 → 3)" in (m.status().details["rebuildNeeded"] or "")
        before = {}
        for q in QUESTIONS:
            response = m.search(q, min_score=0)
            assert not any("paused" in w for w in response.warnings)
            assert response.results, q
            before[q] = [(r.path, r.start_line) for r in response.results]
        assert m.search(QUESTIONS[0], min_score=0).mode == "hybrid"  # the old vectors are read as they are
        assert m.vectors.loaded_vectors == 4

        # Rebuilt in a separate file and swapped in (not in place like a first index): while it is
        # being built, searches still answer from the old index, hybrid, and say a rebuild runs.
        during: list[SearchResponse] = []

        def search_meanwhile(p: SyncProgress) -> None:
            if not during and p.total:
                during.append(m.search(QUESTIONS[0], min_score=0))

        report = m.sync(progress=search_meanwhile)
        assert report.full_rebuild and "schemaVersion" in (report.rebuild_reason or "")
        assert (report.chunks_embedded, report.cache_hits) == (0, 4)  # every vector reused
        assert during and during[0].mode == "hybrid"
        assert [(r.path, r.start_line) for r in during[0].results] == before[QUESTIONS[0]]
        assert any("rebuild in progress" in w for w in during[0].warnings), during[0].warnings
        status = m.status()
        assert status.details["meta"]["schemaVersion"] == SCHEMA_VERSION and status.details["rebuildNeeded"] is None
        # The manager's open connection now reads the new layout.
        with m.index.reading() as db:
            assert not db.legacy_layout()
        for q in QUESTIONS:
            assert [(r.path, r.start_line) for r in m.search(q, min_score=0).results] == before[q], q

    db = IndexDB(db_path, StoreOptions())
    try:
        tables = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master")}
        assert "chunks_vec" not in tables and "chunks_fts_content" not in tables
        assert db.integrity_ok()
        # Each chunk's vector is the one the old index stored for it (as float16), stored once.
        rows = db.conn.execute("SELECT c.id, v.embedding FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id").fetchall()
        assert db.vector_encoding() == "float16"
        assert dict(rows) == {chunk: encode_vector(blob, "float16") for chunk, blob in old_vectors.items()}
        assert db.cache_size() == 4
        # Swapped in over a database of 4 KiB pages, which a WAL database keeps.
        assert db.conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    finally:
        db.close()


def test_keyword_search_on_schema2_before_the_rebuild(legacy: tuple[Path, Path]) -> None:
    """Keyword-only on the old index: the old FTS5 table (with its own content) still answers."""
    ws, db_path = legacy
    with open_manager(ws, _config(db_path, provider="none", sync={"watch": False, "onSearch": False})) as m:
        response = m.search("backup bucket policy")
        assert response.mode == "keyword-only"
        assert [r.path for r in response.results][:1] == ["memory/2026-03-03.md"]


def test_a_float32_index_without_sqlite_vec_is_searched_in_process(legacy: tuple[Path, Path], tmp_path: Path) -> None:
    """Before its rebuild a schema-2 index holds float32 vectors, which sqlite-vec would scan past
    the memory budget: without the extension the in-memory matrix answers whatever its size, and the
    search says so. Once rebuilt (float16) nothing is degraded."""
    ws, db_path = legacy
    missing = str(tmp_path / "no-such-dir" / "vec0.so")
    # approximate off: past the budget this test is about the scan, not the graph (tests/search/test_ann.py)
    store = {"path": str(db_path), "vector": {"extensionPath": missing, "memoryCacheMiB": 0, "approximate": "off"}}
    with open_manager(ws, {**_config(db_path, sync={"watch": False, "onSearch": False}), "store": store}) as m:
        assert m.status().details["vector"]["encoding"] == "float32"
        response = m.search(QUESTIONS[0], min_score=0)
        assert response.mode == "hybrid" and response.results
        assert response.degraded and any("vectors searched in process" in w for w in response.warnings)
        m.sync()
        assert m.status().details["vector"]["encoding"] == "float16"
        after = m.search(QUESTIONS[0], min_score=0)
        assert after.mode == "hybrid" and not after.degraded
        with m.index.reading() as db:
            assert m._vector_search_fn(db) == (stored_vector_search, None)  # a NumPy scan of the stored vectors
        assert [(r.path, r.start_line) for r in after.results] == [(r.path, r.start_line) for r in response.results]
