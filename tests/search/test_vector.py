"""Vector retrieval: sqlite-vec KNN and the in-process fallback rank the same way."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mdrecall.search.vector import InProcessVectors, sqlite_vec_search
from mdrecall.store.db import ChunkRow, FileRow, IndexDB, StoreOptions, vector_to_blob


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


def test_in_process_matches_sqlite_vec(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions())
    try:
        vectors = _fill(db, 300, 16, rng)
        fallback = InProcessVectors()
        for q in rng.normal(size=(5, 16)).astype(np.float32):
            knn = sqlite_vec_search(db, q, 10, None)
            mem = fallback.search(db, q, 10, None)
            assert [c.rowid for c in knn] == [c.rowid for c in mem]
            assert np.allclose([c.score for c in knn], [c.score for c in mem], atol=1e-5)
            exact = vectors @ (q / np.linalg.norm(q))
            assert np.isclose(max(c.score for c in mem), exact.max(), atol=1e-5)
            for sources in (["sessions"], ["memory"]):
                knn_f = sqlite_vec_search(db, q, 10, sources)
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
