"""Vector retrieval by cosine similarity: sqlite-vec KNN, or the same ranking computed in process."""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from mdrecall.search.keyword import Candidate, _COLUMNS, _source_clause
from mdrecall.store.db import IndexDB


def sqlite_vec_search(db: IndexDB, query_vec: np.ndarray, limit: int, sources: Sequence[str] | None) -> list[Candidate]:
    blob = np.asarray(query_vec, dtype=np.float32).tobytes()
    k = limit
    total = db.chunk_count()
    while True:
        rows = db.conn.execute(
            "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?", (blob, min(k, max(total, 1)))
        ).fetchall()
        ids = [r[0] for r in rows]
        dist = {r[0]: float(r[1]) for r in rows}
        out = _hydrate(db, ids, sources, lambda rowid: 1.0 - dist[rowid])
        # A source filter can drop KNN hits: widen until enough survive or everything was seen.
        if len(out) >= limit or len(rows) >= total or not sources:
            return out[:limit]
        k *= 4


def _hydrate(db: IndexDB, rowids: list[int], sources: Sequence[str] | None, score_of) -> list[Candidate]:  # type: ignore[no-untyped-def]
    if not rowids:
        return []
    clause, args = _source_clause(sources)
    marks = ",".join("?" * len(rowids))
    rows = db.conn.execute(f"SELECT {_COLUMNS} FROM chunks c WHERE c.rowid IN ({marks}){clause}", (*rowids, *args)).fetchall()
    out = [Candidate(r[0], r[1], r[2], r[3], r[4], r[5], score_of(r[0])) for r in rows]
    out.sort(key=lambda c: c.score, reverse=True)
    return out


class InProcessVectors:
    """All stored vectors as one normalised matrix, reloaded when the database changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: tuple[int, int] | None = None
        self._rowids = np.zeros(0, dtype=np.int64)
        self._sources: list[str] = []
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    def _load(self, db: IndexDB) -> None:
        version = (id(db), db.data_version(), db.chunk_count())
        if version == self._version:
            return
        rows = db.conn.execute("SELECT rowid, source, embedding FROM chunks WHERE embedding IS NOT NULL").fetchall()
        if rows:
            dims = max(len(r[2]) for r in rows) // 4
            keep = [r for r in rows if len(r[2]) == dims * 4]
            matrix = np.frombuffer(b"".join(r[2] for r in keep), dtype=np.float32).reshape(len(keep), dims).copy()
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            self._matrix = matrix / norms
            self._rowids = np.array([r[0] for r in keep], dtype=np.int64)
            self._sources = [r[1] for r in keep]
        else:
            self._matrix = np.zeros((0, 0), dtype=np.float32)
            self._rowids = np.zeros(0, dtype=np.int64)
            self._sources = []
        self._version = version

    def search(self, db: IndexDB, query_vec: np.ndarray, limit: int, sources: Sequence[str] | None) -> list[Candidate]:
        with self._lock:
            self._load(db)
            if self._matrix.size == 0 or self._matrix.shape[1] != len(query_vec):
                return []
            q = np.asarray(query_vec, dtype=np.float32)
            norm = float(np.linalg.norm(q)) or 1.0
            sims = self._matrix @ (q / norm)
            if sources:
                allowed = np.array([s in sources for s in self._sources])
                sims = np.where(allowed, sims, -np.inf)
            count = min(limit, len(sims))
            top = np.argpartition(-sims, count - 1)[:count] if count < len(sims) else np.arange(len(sims))
            top = [i for i in top if np.isfinite(sims[i])]
            scores = {int(self._rowids[i]): float(sims[i]) for i in top}
        return _hydrate(db, list(scores), sources, lambda rowid: scores[rowid])
