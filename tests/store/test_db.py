"""The SQLite store: schema, per-file atomic replace, the embedding cache, capabilities, writer lock."""

from __future__ import annotations

from pathlib import Path

import apsw
import numpy as np
import pytest

from mdrecall.store import WriterLock, swap_in
from mdrecall.store.db import ChunkRow, FileRow, IndexDB, StoreOptions, vector_to_blob


def _vec(seed: int, dims: int = 8) -> bytes:
    v = np.random.default_rng(seed).normal(size=dims).astype(np.float32)
    return vector_to_blob(v / np.linalg.norm(v))


def _f16(blob: bytes) -> bytes:
    """A unit float32 vector as new files store it."""
    return np.frombuffer(blob, np.float32).astype(np.float16).tobytes()


def _chunk(path: str, i: int, text: str, embedding: bytes | None = None) -> ChunkRow:
    return ChunkRow(f"{path}:{i}", path, "memory", i + 1, i + 1, f"h{path}{i}", text, embedding, text)


def _tables(db: IndexDB) -> set[str]:
    return {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table')")}


def _count(db: IndexDB, table: str) -> int:
    return int(db.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def _referenced(db: IndexDB) -> int:
    return int(db.conn.execute("SELECT COUNT(*) FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id").fetchone()[0])


def test_schema_wal_and_capabilities(tmp_path: Path) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.conn.execute("PRAGMA page_size").fetchone()[0] == 8192
        assert db.vector_encoding() == "float16"
        assert db.caps.fts_available and db.caps.vector_available and db.caps.vec_version
        db.ensure_vec_table(8)
        assert {"meta", "files", "chunks", "chunks_fts", "embedding_spaces", "embedding_cache", "skipped_files"} <= _tables(db)
        # One copy of the text (contentless FTS5) and of each vector (no vec0 table, no chunk column).
        assert "chunks_fts_content" not in _tables(db) and "chunks_vec" not in _tables(db)
        assert "embedding" not in {r[1] for r in db.conn.execute("PRAGMA table_info(chunks)")}
        assert not db.legacy_layout()
        assert db.vec_dims() == 8
        assert db.integrity_ok()
    finally:
        db.close()


def test_each_connection_gets_the_configured_page_cache(tmp_path: Path) -> None:
    """``store.cacheMiB`` (64 by default) sizes SQLite's page cache of every connection the engine
    opens; 0 leaves SQLite's own default."""
    from mdrecall import open_manager

    def cache_kib(db: IndexDB) -> int:
        return -int(db.conn.execute("PRAGMA cache_size").fetchone()[0])

    default = IndexDB(tmp_path / "a.sqlite", StoreOptions())
    plain = IndexDB(tmp_path / "b.sqlite", StoreOptions(cache_mib=0))
    own = apsw.Connection(str(tmp_path / "c.sqlite"))
    try:
        assert cache_kib(default) == 64 * 1024
        assert plain.conn.execute("PRAGMA cache_size").fetchone()[0] == own.execute("PRAGMA cache_size").fetchone()[0]
    finally:
        default.close()
        plain.close()
        own.close()
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "notes.md").write_text("# Notes\n\nThe deploy runs on Fridays.\n", encoding="utf-8")
    config = {"provider": "none", "store": {"path": str(tmp_path / "m.sqlite"), "cacheMiB": 8}}
    with open_manager(ws, config, use_global_config=False) as m:
        m.sync()
        with m.index.reading() as db:
            assert cache_kib(db) == 8 * 1024
        assert m.search("deploy Fridays").results


def test_replacing_a_file_keeps_the_rows_it_repeats_exactly(tmp_path: Path) -> None:
    """Rows repeated exactly (id, model, context, line numbers, vector) stay as they were; any
    other difference rewrites the row, its keyword entry and its vector reference."""
    from dataclasses import replace

    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    db.ensure_vec_table(8)
    file = FileRow("s.jsonl", "sessions", "h1", 1, 10)
    rows = [replace(_chunk("s.jsonl", i, f"alpha{i} words", _vec(i)), embed_hash=f"e{i}") for i in range(7)]
    try:
        db.replace_file(file, rows, "m")
        before = dict(db.conn.execute("SELECT id, rowid FROM chunks").fetchall())
        changed = [
            rows[0],  # unchanged: kept
            replace(rows[1], context="Heading one"),  # a heading renamed above it
            replace(rows[2], line_numbers="3*2"),
            replace(rows[3], embedding=_vec(30), embed_hash="e30"),  # embedded from other input
            replace(rows[4], embedding=None),  # without a vector now
            rows[5],  # kept
            replace(rows[6], text="zeta rewritten", fts_text="zeta rewritten"),  # the same id, other text
            _chunk("s.jsonl", 9, "omega appended", _vec(9)),  # new
        ]
        db.replace_file(FileRow("s.jsonl", "sessions", "h2", 2, 20), changed, "m")
        after = dict(db.conn.execute("SELECT id, rowid FROM chunks").fetchall())
        assert {i for i in after if after[i] == before.get(i)} == {rows[0].id, rows[5].id}
        assert [_count(db, t) for t in ("files", "chunks", "chunks_fts")] == [1, 8, 8]
        match = "SELECT c.id FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid WHERE chunks_fts MATCH ?"
        assert db.conn.execute(match, ("zeta",)).fetchall() == [(rows[6].id,)]
        assert db.conn.execute(match, ("alpha6",)).fetchall() == []
        assert db.conn.execute("SELECT rowid FROM chunks_fts ORDER BY rowid").fetchall() == \
            db.conn.execute("SELECT rowid FROM chunks ORDER BY rowid").fetchall()  # fmt: skip
        found = db.conn.execute("SELECT context, line_numbers, vector_id IS NULL FROM chunks WHERE id = ?", (rows[1].id,)).fetchone()
        assert found == ("Heading one", None, 0)
        assert db.conn.execute("SELECT line_numbers FROM chunks WHERE id = ?", (rows[2].id,)).fetchone() == ("3*2",)
        (vector,) = db.conn.execute("SELECT v.hash FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id WHERE c.id = ?",
                                    (rows[3].id,)).fetchone()  # fmt: skip
        assert vector == "e30"
        assert db.conn.execute("SELECT vector_id FROM chunks WHERE id = ?", (rows[4].id,)).fetchone() == (None,)
        assert db.conn.execute("SELECT hash, size FROM files").fetchall() == [("h2", 20)]
        # Under another model name every row is rewritten.
        db.replace_file(FileRow("s.jsonl", "sessions", "h3", 3, 30), changed, "m2")
        assert db.conn.execute("SELECT DISTINCT model FROM chunks").fetchall() == [("m2",)]
        assert db.integrity_ok()
    finally:
        db.close()


def test_replace_and_remove_touch_every_table(tmp_path: Path) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    db.ensure_vec_table(8)
    try:
        db.replace_file(FileRow("memory/a.md", "memory", "ha", 1, 10), [_chunk("memory/a.md", i, f"alpha {i}", _vec(i)) for i in range(3)], "m")
        db.replace_file(FileRow("memory/b.md", "memory", "hb", 1, 10), [_chunk("memory/b.md", 0, "beta", _vec(9))], "m")
        assert [_count(db, t) for t in ("files", "chunks", "chunks_fts", "embedding_cache")] == [2, 4, 4, 4]
        assert _referenced(db) == 4
        # Replacing a file drops its old rows first; its old vectors stay, unreferenced, as the cache.
        db.replace_file(FileRow("memory/a.md", "memory", "ha2", 2, 11), [_chunk("memory/a.md", 7, "gamma", _vec(7))], "m")
        assert [_count(db, t) for t in ("files", "chunks", "chunks_fts", "embedding_cache")] == [2, 2, 2, 5]
        assert _referenced(db) == 2 and db.cache_unused() == 3
        hits = db.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'alpha'").fetchall()
        assert hits == []
        db.remove_file("memory/a.md")
        assert [_count(db, t) for t in ("files", "chunks", "chunks_fts")] == [1, 1, 1]
        # The surviving FTS row and vector belong to the surviving chunk.
        assert db.conn.execute("SELECT rowid FROM chunks_fts").fetchall() == db.conn.execute("SELECT rowid FROM chunks").fetchall()
        (blob,) = db.conn.execute("SELECT v.embedding FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id").fetchone()
        assert blob == _f16(_vec(9))  # stored as float16: half the bytes
        # Unused vectors are pruned first, least recently used first; the ones in use never.
        with db.conn:
            assert db.cache_prune(1) == 3
            assert db.cache_prune(0) == 1
        assert _count(db, "embedding_cache") == 1 and _referenced(db) == 1
        assert db.integrity_ok()
        db.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('integrity-check')")
    finally:
        db.close()


def test_identical_texts_share_one_vector(tmp_path: Path) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        same = ChunkRow("x:0", "memory/x.md", "memory", 1, 1, "hx", "same words", _vec(1), "same words", "embed-hash")
        other = ChunkRow("y:0", "memory/y.md", "memory", 1, 1, "hy", "same words", _vec(1), "same words", "embed-hash")
        db.replace_file(FileRow("memory/x.md", "memory", "hx", 1, 1), [same], "m")
        db.replace_file(FileRow("memory/y.md", "memory", "hy", 1, 1), [other], "m")
        assert _count(db, "embedding_cache") == 1 and _referenced(db) == 2
        with db.conn:
            db.cache_prune(0)
        db.remove_file("memory/x.md")
        assert _referenced(db) == 1  # still used by y.md: never pruned
    finally:
        db.close()


def test_skipped_files_are_recorded_and_cleared(tmp_path: Path) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        db.replace_file(FileRow("memory/a.md", "memory", "ha", 1, 10), [_chunk("memory/a.md", 0, "alpha")], "m")
        db.record_skipped("memory/a.md", "memory", "binary file", 2, 20)
        assert _count(db, "chunks") == 0 and _count(db, "files") == 0
        assert db.skipped()["memory/a.md"][1] == "binary file"
        db.remove_file("memory/a.md")
        assert db.skipped() == {}
    finally:
        db.close()


def test_a_file_without_chunks_gains_them_and_a_skipped_one_is_indexed(tmp_path: Path) -> None:
    """A file with no stored chunk (empty before, or skipped) is written without looking for chunks
    to delete; its file row or skip record is still replaced."""
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        db.replace_file(FileRow("memory/a.md", "memory", "empty", 1, 0), [], "m")
        assert _count(db, "files") == 1 and _count(db, "chunks") == 0
        db.replace_file(FileRow("memory/a.md", "memory", "ha", 2, 10), [_chunk("memory/a.md", 0, "alpha")], "m")
        db.record_skipped("memory/b.md", "memory", "binary file", 2, 20)
        db.replace_file(FileRow("memory/b.md", "memory", "hb", 3, 10), [_chunk("memory/b.md", 0, "beta")], "m")
        assert db.skipped() == {}
        assert sorted(db.files()) == ["memory/a.md", "memory/b.md"] and db.files()["memory/a.md"].hash == "ha"
        assert [_count(db, t) for t in ("files", "chunks", "chunks_fts")] == [2, 2, 2]
        db.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('integrity-check')")
    finally:
        db.close()


def test_embedding_cache_get_put_prune(tmp_path: Path) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        with db.conn:
            db.cache_put("local", "m", "k", [(f"h{i}", _vec(i)) for i in range(10)])
        got = db.cache_get("local", "m", "k", [f"h{i}" for i in range(12)])
        assert sorted(got) == sorted(f"h{i}" for i in range(10))
        # Handed back as float32 (what every store speaks), within float16's rounding of what was put.
        assert len(got["h3"]) == len(_vec(3)) and _f16(got["h3"]) == _f16(_vec(3))
        assert np.allclose(np.frombuffer(got["h3"], np.float32), np.frombuffer(_vec(3), np.float32), atol=1e-3)
        assert db.cache_get("local", "m", "other-key", ["h1"]) == {}  # keyed by provider identity too
        with db.conn:
            db.cache_touch("local", "m", "k", ["h0", "h1"])  # most recently used survive pruning
            removed = db.cache_prune(4)
        assert removed == 6 and db.cache_size() == 4
        assert {"h0", "h1"} <= set(db.cache_get("local", "m", "k", [f"h{i}" for i in range(10)]))
        # More than one SQL batch of hashes.
        many = [f"x{i}" for i in range(1000)]
        with db.conn:
            db.cache_put("local", "m", "k", [(h, _vec(1)) for h in many])
        assert len(db.cache_get("local", "m", "k", many)) == 1000
    finally:
        db.close()


def test_missing_vector_extension_is_reported(tmp_path: Path) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions(vector_extension_path=str(tmp_path / "nope.so")))
    try:
        assert not db.caps.vector_available
        assert db.caps.vector_error and "sqlite-vec unavailable" in db.caps.vector_error
        db.ensure_vec_table(8)  # vectors are stored without the extension too
        assert db.vec_dims() == 8
        db.replace_file(FileRow("memory/a.md", "memory", "ha", 1, 10), [_chunk("memory/a.md", 0, "alpha", _vec(1))], "m")
        # Vectors are stored without the extension (searched in process).
        assert _referenced(db) == 1
        layout, refs = db.vector_refs()
        assert not layout.legacy and layout.encoding == "float16"
        stored = db.vector_blobs(layout, refs)
        assert stored == [_f16(_vec(1))]
    finally:
        db.close()


def deny_fts5(conn: apsw.Connection) -> None:
    def authorizer(op: int, p1: str | None, p2: str | None, db_name: str | None, trigger: str | None) -> int:
        if op == apsw.SQLITE_CREATE_VTABLE and p2 == "fts5":
            return apsw.SQLITE_DENY
        return apsw.SQLITE_OK

    conn.authorizer = authorizer


def test_fts_denied_is_reported(tmp_path: Path) -> None:
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions(connection_hook=deny_fts5))
    try:
        assert not db.caps.fts_available
        assert "FTS5 unavailable" in (db.caps.fts_error or "")
        db.replace_file(FileRow("memory/a.md", "memory", "ha", 1, 10), [_chunk("memory/a.md", 0, "alpha")], "m")
        assert _count(db, "chunks") == 1
    finally:
        db.close()


def test_garbage_file_fails_integrity(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite"
    path.write_bytes(b"this is not a database" * 500)
    with pytest.raises(Exception):
        db = IndexDB(path, StoreOptions())
        assert db.integrity_ok()  # pragma: no cover - opening must already fail


def test_writer_lock_is_exclusive(tmp_path: Path) -> None:
    first = WriterLock(tmp_path / "i.sqlite")
    second = WriterLock(tmp_path / "i.sqlite")
    assert first.acquire(timeout=0)
    try:
        assert not second.acquire(timeout=0.1)
    finally:
        first.release()
    with second.hold(timeout=0) as got:
        assert got and second.held
    assert not second.held


def test_swap_in_replaces_content_while_a_reader_is_open(tmp_path: Path) -> None:
    live_path = tmp_path / "live.sqlite"
    live = IndexDB(live_path, StoreOptions())
    live.replace_file(FileRow("memory/old.md", "memory", "h", 1, 1), [_chunk("memory/old.md", 0, "old words")], "m")
    live.close()
    reader = IndexDB(live_path, StoreOptions())
    built = IndexDB(tmp_path / "built.sqlite", StoreOptions())
    built.replace_file(FileRow("memory/new.md", "memory", "h", 1, 1), [_chunk("memory/new.md", 0, "new words")], "m")
    try:
        with reader.conn:  # a read transaction in progress keeps seeing the old index
            assert list(reader.files()) == ["memory/old.md"]
            swap_in(built, live_path, 5000)
            assert list(reader.files()) == ["memory/old.md"]
        assert list(reader.files()) == ["memory/new.md"]
        assert reader.conn.execute(
            "SELECT c.text FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid WHERE chunks_fts MATCH 'new'"
        ).fetchall() == [("new words",)]
    finally:
        reader.close()
        built.close()


def test_a_file_from_before_line_numbers_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = IndexDB(path, StoreOptions())
    db.replace_file(FileRow("a.md", "memory", "h", 1, 1), [_chunk("a.md", 0, "alpha")], "m")
    db.conn.execute("ALTER TABLE chunks DROP COLUMN line_numbers")
    db.close()
    db = IndexDB(path, StoreOptions())
    try:
        assert db.chunk_line_numbers([1]) == {}
        row = ChunkRow("s:1", "s.jsonl", "sessions", 2, 3, "hs", "User: a\nAssistant: b\nb", None, "x", line_numbers="2,3*2")
        db.replace_file(FileRow("s.jsonl", "sessions", "h2", 1, 1), [row], "m")
        rowid = int(db.conn.execute("SELECT rowid FROM chunks WHERE id = 's:1'").fetchone()[0])
        assert db.chunk_line_numbers([rowid]) == {rowid: "2,3*2"}
    finally:
        db.close()


def _bm25(db: IndexDB, query: str) -> list[tuple[int, float]]:
    return [(r[0], r[1]) for r in db.conn.execute("SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank, rowid", (query,))]


def test_the_keyword_index_is_compacted_to_one_segment_with_the_same_rankings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mdrecall.store.db as store_db

    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
        for f in range(12):  # a transaction per file: a segment each, as a sync writes them
            chunks = [_chunk(f"memory/{f}.md", i, " ".join(words[(f + i + k) % 6] for k in range(1 + i % 3)) + f" note {f}") for i in range(4)]
            db.replace_file(FileRow(f"memory/{f}.md", "memory", f"h{f}", 1, 10), chunks, "m")
        db.remove_file("memory/3.md")  # deleted rows are part of what compaction folds in
        queries = ["alpha", "beta OR gamma", "note", "delta epsilon", "zeta OR alpha OR note"]
        before = {q: _bm25(db, q) for q in queries}
        split = db.keyword_segments()
        assert split > 1
        # Incremental: a large index with few segments is left to FTS5's automerge.
        monkeypatch.setattr(store_db, "COMPACT_ALWAYS_CHUNKS", 10)
        monkeypatch.setattr(store_db, "COMPACT_SEGMENTS", split)
        with db.conn:
            assert db.compact_keyword_index(built=False) is False
        monkeypatch.setattr(store_db, "COMPACT_SEGMENTS", split - 1)
        with db.conn:  # a sync someone waits for (scoped to what moved) leaves a large merge to a full one
            assert db.compact_keyword_index(built=False, small_only=True) is False
        monkeypatch.setattr(store_db, "COMPACT_MAX_CHUNKS", 10)
        with db.conn:
            assert db.compact_keyword_index(built=False) is False  # past the size where rewriting pays
        assert db.keyword_segments() == split
        with db.conn:
            assert db.compact_keyword_index(built=True) is True  # after a first index or a rebuild: always
        assert db.keyword_segments() == 1
        assert {q: _bm25(db, q) for q in queries} == before
        assert all(before[q] for q in queries)
        with db.conn:
            assert db.compact_keyword_index(built=True) is False  # one segment already
        db.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('integrity-check')")
    finally:
        db.close()


def test_a_sync_leaves_a_small_keyword_index_in_one_segment(tmp_path: Path) -> None:
    from mdrecall import open_manager

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for day in range(1, 9):
        (ws / "memory" / f"2026-11-{day:02d}.md").write_text(f"# Day {day}\n\n- Deployed build {day} on Tuesday.\n", encoding="utf-8")
    store = tmp_path / "index.sqlite"
    config = {"provider": "none", "store": {"path": str(store)}, "sync": {"watch": False}}
    with open_manager(ws, config, use_global_config=False) as m:
        m.sync()
        for day in range(1, 4):  # incremental syncs, one file each
            (ws / "memory" / f"2026-11-{day:02d}.md").write_text(f"# Day {day}\n\n- Deployed build {day}b on Friday.\n", encoding="utf-8")
            m.sync()
        assert [r.path for r in m.search("deployed Friday build").results][:3]
    db = IndexDB(store, StoreOptions())
    try:
        assert db.keyword_segments() == 1
    finally:
        db.close()
