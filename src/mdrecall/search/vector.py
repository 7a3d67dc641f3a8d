"""Vector retrieval by cosine similarity: sqlite-vec KNN, or the same ranking computed in process."""

from __future__ import annotations

import threading

import numpy as np

from mdrecall.search.keyword import _COLUMNS, Candidate
from mdrecall.search.scope import Scope, ScopeLike, as_scope
from mdrecall.store.db import IndexDB


def sqlite_vec_search(db: IndexDB, query_vec: np.ndarray, limit: int, scope: ScopeLike) -> list[Candidate]:
    where = as_scope(scope)
    blob = np.asarray(query_vec, dtype=np.float32).tobytes()
    k = limit
    total = db.chunk_count()
    while True:
        rows = db.conn.execute(
            "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?", (blob, min(k, max(total, 1)))
        ).fetchall()
        ids = [r[0] for r in rows]
        dist = {r[0]: float(r[1]) for r in rows}
        out = _hydrate(db, ids, where, lambda rowid, dist=dist: 1.0 - dist[rowid])
        # A filter can drop KNN hits: widen until enough survive or everything was seen.
        if len(out) >= limit or len(rows) >= total or not where.restricted:
            return out[:limit]
        k *= 4


def _hydrate(db: IndexDB, rowids: list[int], scope: Scope, score_of) -> list[Candidate]:  # type: ignore[no-untyped-def]
    if not rowids:
        return []
    clause, args = scope.sql()
    marks = ",".join("?" * len(rowids))
    rows = db.conn.execute(f"SELECT {_COLUMNS} FROM chunks c WHERE c.rowid IN ({marks}){clause}", (*rowids, *args)).fetchall()
    out = [Candidate(r[0], r[1], r[2], r[3], r[4], r[5], score_of(r[0])) for r in rows]
    out.sort(key=lambda c: c.score, reverse=True)
    return out


class InProcessVectors:
    """All stored vectors as one normalised matrix: the KNN when sqlite-vec cannot load, and a cache
    in front of sqlite-vec while the matrix fits ``max_bytes``.

    sqlite-vec's ``vec0`` scans every vector on disk per query (10 ms at 10k × 384, 95 ms at 100k);
    the same product over the vectors in memory takes 1.7 / 12 ms. The matrix is refreshed only when
    the stored chunks change (``IndexDB.chunks_version``), not on every commit, and then only the new
    and changed rows are read.
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._version: tuple[int, str | None, int] | None = None
        self._rowids = np.zeros(0, dtype=np.int64)
        self._sources = np.zeros(0, dtype=object)
        self._paths: list[str] = []
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._index: dict[int, tuple[int, str | None]] = {}  # rowid -> (matrix row, embed_hash)
        self._epoch: tuple[int, object] | None = None  # (connection, providerKey) the rows belong to
        self.loads = 0  # how many times the database was consulted after a change
        self.last_reread = 0  # vectors read from the database by the last load

    @property
    def loaded_vectors(self) -> int:
        return int(self._matrix.shape[0])

    @property
    def loaded_bytes(self) -> int:
        return int(self._matrix.nbytes)

    def fits(self, db: IndexDB, dims: int | None) -> bool:
        """Whether the index's vectors fit the memory budget (always True without a budget)."""
        if self.max_bytes is None:
            return True
        if not dims or self.max_bytes <= 0:
            return False
        with self._lock:
            if self._version is not None and self._version == self._current_version(db):
                return self._matrix.nbytes <= self.max_bytes
        return db.chunk_count() * dims * 4 <= self.max_bytes

    @staticmethod
    def _current_version(db: IndexDB) -> tuple[int, str | None, int]:
        """What the loaded matrix must match: the connection and the chunks' version token (an index
        written before tokens existed falls back to SQLite's data_version)."""
        token = db.chunks_version()
        return (id(db), token, db.data_version() if token is None else 0)

    def _load(self, db: IndexDB) -> None:
        version = self._current_version(db)
        if version == self._version:
            return
        meta = db.read_meta() or {}
        epoch = (id(db), meta.get("providerKey"))
        # What each stored vector is: the hash of exactly what was embedded (same hash, same model:
        # same vector), so a change re-reads only new and changed rows, not all of them (100k
        # vectors: ~2 s for a full read).
        rows = db.conn.execute(
            "SELECT rowid, embed_hash, length(embedding), source, path FROM chunks WHERE embedding IS NOT NULL"
        ).fetchall()
        self.loads += 1
        dims = max((r[2] for r in rows), default=0) // 4
        rows = [r for r in rows if r[2] == dims * 4]
        reuse = epoch == self._epoch and self._matrix.ndim == 2 and self._matrix.shape[1] == dims
        old = self._index if reuse else {}
        keep: list[int] = []
        fetch: list[int] = []
        for rowid, embed_hash, _len, _source, _path in rows:
            hit = old.get(rowid)
            if hit is not None and hit[1] == embed_hash:
                keep.append(hit[0])
            else:
                fetch.append(rowid)
        fetched = self._read_vectors(db, fetch, dims)
        positions = np.asarray(keep, dtype=np.int64)
        if len(positions) and positions[0] == 0 and np.all(np.diff(positions) == 1):
            kept = self._matrix[: len(positions)]  # nothing before them removed: a view, no copy
        else:
            kept = self._matrix[positions] if len(positions) else np.zeros((0, dims), dtype=np.float32)
        matrix = np.concatenate([kept, fetched]) if len(fetched) else kept
        # Rows in the order they were assembled: kept ones first, then the newly read ones.
        by_rowid = {r[0]: r for r in rows}
        order = self._rowids[positions].tolist() + fetch if len(positions) else list(fetch)
        self._matrix = matrix
        self._rowids = np.asarray(order, dtype=np.int64)
        self._sources = np.array([by_rowid[r][3] for r in order], dtype=object)
        self._paths = [by_rowid[r][4] for r in order]
        self._index = {rowid: (pos, by_rowid[rowid][1]) for pos, rowid in enumerate(order)}
        self._epoch = epoch
        self._version = version
        self.last_reread = len(fetch)

    @staticmethod
    def _read_vectors(db: IndexDB, rowids: list[int], dims: int) -> np.ndarray:
        """Normalised vectors of ``rowids``, in that order."""
        if not rowids:
            return np.zeros((0, dims), dtype=np.float32)
        blobs: dict[int, bytes] = {}
        for start in range(0, len(rowids), 500):
            batch = rowids[start : start + 500]
            marks = ",".join("?" * len(batch))
            blobs.update(db.conn.execute(f"SELECT rowid, embedding FROM chunks WHERE rowid IN ({marks})", batch).fetchall())
        matrix = np.frombuffer(b"".join(blobs[r] for r in rowids), dtype=np.float32).reshape(len(rowids), dims).copy()
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        matrix /= norms
        return matrix

    def search(self, db: IndexDB, query_vec: np.ndarray, limit: int, scope: ScopeLike) -> list[Candidate]:
        where = as_scope(scope)
        with self._lock:
            self._load(db)
            if self._matrix.size == 0 or self._matrix.shape[1] != len(query_vec):
                return []
            q = np.asarray(query_vec, dtype=np.float32)
            norm = float(np.linalg.norm(q)) or 1.0
            # einsum, not ``@``: numpy's BLAS would spin up its own threads for this product and
            # then fight torch's threads for the cores, doubling the query embedding's time (measured:
            # 14 ms → 32 ms per hybrid query on 2 cores). einsum runs single-threaded: 1 ms at 10k × 384.
            sims = np.einsum("ij,j->i", self._matrix, q / norm)
            allowed = where.mask(self._sources, self._paths)
            if allowed is not None:
                sims = np.where(allowed, sims, -np.inf)
            count = min(limit, len(sims))
            top = np.argpartition(-sims, count - 1)[:count] if count < len(sims) else np.arange(len(sims))
            top = [i for i in top if np.isfinite(sims[i])]
            scores = {int(self._rowids[i]): float(sims[i]) for i in top}
        return _hydrate(db, list(scores), where, lambda rowid: scores[rowid])
