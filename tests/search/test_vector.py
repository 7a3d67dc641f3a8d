"""Vector retrieval: the scan of the stored vectors (sqlite-vec over float32 files, NumPy over
float16 ones) and the in-memory matrix rank the same way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdrecall.search.vector import InProcessVectors, stored_vector_search
from mdrecall.store.db import VECTOR_ENCODING_KEY, ChunkRow, FileRow, IndexDB, StoreOptions, vector_to_blob


def _fill(db: IndexDB, n: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    db.ensure_vec_table(dims)
    vectors = rng.normal(size=(n, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i in range(n):
        source = "sessions" if i % 3 == 0 else "memory"
        path = f"memory/f{i}.md"
        db.replace_file(
            FileRow(path, source, f"h{i}", 1, 1),
            [ChunkRow(f"id{i}", path, source, 1, 1, f"h{i}", f"text {i}", vector_to_blob(vectors[i]), f"text {i}")],
            "m",
        )
    return vectors


@pytest.mark.parametrize("encoding", ["float16", "float32"])
def test_the_disk_scan_matches_the_matrix(tmp_path: Path, encoding: str) -> None:
    """float16: new files (NumPy scans them); float32: a file that recorded no encoding (schema-3
    files from before float16; sqlite-vec scans them). Scores are within float16's rounding of the
    exact float32 cosine."""
    rng = np.random.default_rng(5)
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        if encoding == "float32":
            with db.conn:
                db.conn.execute("DELETE FROM meta WHERE key = ?", (VECTOR_ENCODING_KEY,))
        assert db.vector_encoding() == encoding
        vectors = _fill(db, 300, 16, rng)
        stored = db.conn.execute("SELECT length(embedding) FROM embedding_cache LIMIT 1").fetchone()[0]
        assert stored == 16 * (2 if encoding == "float16" else 4)
        fallback = InProcessVectors()
        for q in rng.normal(size=(5, 16)).astype(np.float32):
            knn = stored_vector_search(db, q, 10, None)
            mem = fallback.search(db, q, 10, None)
            assert [c.rowid for c in knn] == [c.rowid for c in mem]
            assert np.allclose([c.score for c in knn], [c.score for c in mem], atol=1e-5)
            exact = vectors @ (q / np.linalg.norm(q))
            assert np.isclose(max(c.score for c in mem), exact.max(), atol=1e-5 if encoding == "float32" else 2e-3)
            for sources in (["sessions"], ["memory"]):
                knn_f = stored_vector_search(db, q, 10, sources)
                mem_f = fallback.search(db, q, 10, sources)
                assert len(knn_f) == 10 and all(c.source == sources[0] for c in knn_f)
                assert [c.rowid for c in knn_f] == [c.rowid for c in mem_f]
    finally:
        db.close()


def test_in_process_reloads_after_changes(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions(vector_enabled=False))
    try:
        vectors = _fill(db, 20, 8, rng)
        fallback = InProcessVectors()
        assert fallback.search(db, vectors[4], 1, None)[0].path == "memory/f4.md"
        db.remove_file("memory/f4.md")
        top = fallback.search(db, vectors[4], 1, None)
        assert top and top[0].path != "memory/f4.md"
    finally:
        db.close()


def test_matrix_reloads_only_when_chunks_change(tmp_path: Path) -> None:
    """A commit that leaves the chunks alone (a no-op sync's bookkeeping) keeps the loaded matrix;
    a change written through another connection (another process) is seen on the next search."""
    rng = np.random.default_rng(2)
    path = tmp_path / "i.sqlite"
    db = IndexDB(path, StoreOptions())
    other = IndexDB(path, StoreOptions())
    try:
        vectors = _fill(db, 30, 8, rng)
        cache = InProcessVectors()
        assert cache.search(db, vectors[3], 1, None)[0].path == "memory/f3.md"
        assert cache.loads == 1
        with other.conn:
            other.set_kv("last_sync_at", "1.0")
        cache.search(db, vectors[3], 1, None)
        assert cache.loads == 1
        other.remove_file("memory/f3.md")
        top = cache.search(db, vectors[3], 1, None)
        assert cache.loads == 2 and top[0].path != "memory/f3.md"
        replacement = vectors[3] * -1
        other.replace_file(
            FileRow("memory/new.md", "memory", "hn", 1, 1),
            [ChunkRow("idn", "memory/new.md", "memory", 1, 1, "hn", "new", vector_to_blob(replacement), "new")],
            "m",
        )
        assert cache.search(db, replacement, 1, None)[0].path == "memory/new.md"
    finally:
        other.close()
        db.close()


def test_memory_budget_decides_whether_the_matrix_is_used(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        _fill(db, 100, 16, rng)  # 100 × 16 × 4 bytes = 6,400 bytes
        assert InProcessVectors(max_bytes=6_400).fits(db, 16)
        assert not InProcessVectors(max_bytes=6_399).fits(db, 16)
        assert not InProcessVectors(max_bytes=0).fits(db, 16)
        assert InProcessVectors().fits(db, 16)  # no budget: the fallback always answers
    finally:
        db.close()


def test_a_change_rereads_only_new_and_changed_vectors(tmp_path: Path) -> None:
    """After a write, only the rows whose embedded text changed are read again, and the ranking is
    exactly what a fresh full load gives (rowids reused by SQLite included)."""
    rng = np.random.default_rng(4)
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        vectors = _fill(db, 200, 16, rng)
        cache = InProcessVectors()
        cache.search(db, vectors[0], 5, None)
        assert cache.last_reread == 200
        # Replace one file's chunk with new text (a new vector), delete another, add two.
        new = rng.normal(size=(3, 16)).astype(np.float32)
        db.replace_file(FileRow("memory/f7.md", "memory", "h7b", 2, 2),
                        [ChunkRow("id7b", "memory/f7.md", "memory", 1, 1, "h7b", "changed", vector_to_blob(new[0]), "changed")], "m")
        db.remove_file("memory/f199.md")  # the highest rowid: SQLite may hand it out again
        for i, vec in enumerate(new[1:]):
            path = f"memory/added{i}.md"
            db.replace_file(FileRow(path, "memory", f"a{i}", 1, 1), [ChunkRow(f"a{i}", path, "memory", 1, 1, f"a{i}", f"added {i}", vector_to_blob(vec), f"added {i}")], "m")
        for q in [new[0], new[1], new[2], vectors[7], vectors[199], *rng.normal(size=(5, 16)).astype(np.float32)]:
            mine = [(c.rowid, c.path, round(c.score, 5)) for c in cache.search(db, q, 10, None)]
            fresh = [(c.rowid, c.path, round(c.score, 5)) for c in InProcessVectors().search(db, q, 10, None)]
            assert mine == fresh
        assert cache.last_reread == 3 and cache.loaded_vectors == 201
        assert cache.search(db, new[0], 1, None)[0].path == "memory/f7.md"
        # Another model's vectors (a rebuild swapped in): everything is read again.
        with db.conn:
            db.write_meta({"providerKey": "another-model"})
            db.set_kv("chunks_version", "swapped")
        cache.search(db, new[0], 1, None)
        assert cache.last_reread == 201
    finally:
        db.close()


def test_rows_kept_between_searches_give_what_the_query_reads(tmp_path: Path) -> None:
    """The vector side's candidates come from rows kept per version of the chunks: the same
    candidates, texts, scores and order as reading them each time (``_hydrate``), including after a
    file is rewritten (new text under the same path) or removed, and with equal scores (ties keep
    the query's rowid order)."""
    from mdrecall.search import vector
    from mdrecall.search.scope import as_scope

    rng = np.random.default_rng(9)
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions(vector_enabled=False))
    try:
        vectors = _fill(db, 60, 8, rng)
        twin = vectors[7]
        for i in (50, 51):  # two chunks with the same vector as f7: their scores tie
            db.replace_file(FileRow(f"memory/t{i}.md", "memory", f"t{i}", 1, 1),
                            [ChunkRow(f"t{i}", f"memory/t{i}.md", "memory", 1, 1, f"t{i}", f"twin {i}", vector_to_blob(twin), f"twin {i}")],
                            "m")  # fmt: skip
        kept = InProcessVectors()

        def plain(q: np.ndarray) -> list[tuple[int, str, str, float]]:
            scores = {c.rowid: c.score for c in kept.search(db, q, 12, None)}
            read = vector._hydrate(db, list(scores), as_scope(None), lambda rowid: scores[rowid])
            return [(c.rowid, c.path, c.text, c.score) for c in read]

        queries = [twin, *rng.normal(size=(6, 8)).astype(np.float32)]
        for _ in range(2):  # read, then kept
            for q in queries:
                assert [(c.rowid, c.path, c.text, c.score) for c in kept.search(db, q, 12, None)] == plain(q)
        assert len(kept._rows) > 12
        db.replace_file(FileRow("memory/f7.md", "memory", "h7b", 2, 2),
                        [ChunkRow("id7b", "memory/f7.md", "memory", 1, 1, "h7b", "text 7 rewritten", vector_to_blob(twin), "text 7 rewritten")],
                        "m")  # fmt: skip
        assert "text 7 rewritten" in [c.text for c in kept.search(db, twin, 12, None)]  # now kept
        db.remove_file("memory/t50.md")
        last = db.conn.execute("SELECT MAX(rowid) FROM chunks").fetchone()[0]
        db.remove_file("memory/f7.md")  # the newest row: SQLite gives its rowid to the next one
        db.replace_file(FileRow("memory/n.md", "memory", "n", 1, 1),
                        [ChunkRow("n", "memory/n.md", "memory", 1, 1, "n", "a new note", vector_to_blob(twin), "a new note")],
                        "m")  # fmt: skip
        assert db.conn.execute("SELECT rowid FROM chunks WHERE path = 'memory/n.md'").fetchone()[0] == last
        top = [c.text for c in kept.search(db, twin, 12, None)]
        assert "a new note" in top and "twin 50" not in top and "text 7 rewritten" not in top
        for q in queries:
            assert [(c.rowid, c.path, c.text, c.score) for c in kept.search(db, q, 12, None)] == plain(q)
    finally:
        db.close()
