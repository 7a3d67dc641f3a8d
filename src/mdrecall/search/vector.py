"""Vector retrieval by cosine similarity: an in-memory matrix of the stored vectors, or a scan of
the stored vectors on disk when they do not fit its budget."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mdrecall import threads
from mdrecall.search.keyword import _COLUMNS, Candidate
from mdrecall.search.scope import Scope, ScopeLike, as_scope
from mdrecall.store.db import IndexDB, VectorLayout, VectorRef, bytes_per_dim
from mdrecall.store.sql import rows

if TYPE_CHECKING:
    import numpy as np

#: Vectors read and compared per step of a disk scan in NumPy.
SCAN_BLOCK = 4096


#: Chunk rows kept for the vector side's candidates (the first read dropped first): a search
#: reads up to its candidate limit of them.
KNOWN_ROWS = 4096

#: (rowid, path, source, start line, end line, text), as ``_COLUMNS`` reads them.
_Row = tuple[int, str, str, int, int, str]


def stored_vector_search(db: IndexDB, query_vec: np.ndarray, limit: int, scope: ScopeLike) -> list[Candidate]:
    """KNN straight from the database, for indexes whose vectors exceed the memory budget: one pass
    over the stored vectors, the scope filter applied inside the scan. sqlite-vec's
    ``vec_distance_cosine`` reads float32 files; float16 files (and any file without the extension)
    are scanned in NumPy, in blocks."""
    import numpy as np  # here and below, not at import: keyword-only searches never load numpy

    where = as_scope(scope)
    q = np.asarray(query_vec, dtype=np.float32)
    legacy, encoding = db.legacy_layout(), db.vector_encoding()
    if not db.caps.vector_available or encoding != "float32":
        return _numpy_scan(db, q, limit, where)
    clause, args = where.sql()
    if legacy:
        sql = (
            "SELECT c.rowid, vec_distance_cosine(c.embedding, ?) AS d FROM chunks c "
            f"WHERE c.embedding IS NOT NULL AND length(c.embedding) = ?{clause} ORDER BY d LIMIT ?"
        )
    else:
        sql = (
            "SELECT c.rowid, vec_distance_cosine(v.embedding, ?) AS d FROM chunks c "
            "JOIN embedding_cache v ON v.rowid = c.vector_id "
            f"WHERE length(v.embedding) = ?{clause} ORDER BY d LIMIT ?"
        )
    dist = {int(r[0]): float(r[1]) for r in rows(db.conn, sql, (q.tobytes(), q.nbytes, *args, limit))}
    return _hydrate(db, list(dist), where, lambda rowid: 1.0 - dist[rowid])


def _numpy_scan(db: IndexDB, q: np.ndarray, limit: int, where: Scope) -> list[Candidate]:
    import numpy as np

    threads.configure()
    q = q / (float(np.linalg.norm(q)) or 1.0)
    layout, refs = db.vector_refs()
    if where.restricted:
        refs = [r for r in refs if where.allows(r.source, r.path)]
    size = len(q) * bytes_per_dim(layout.encoding)
    best: dict[int, float] = {}
    for start in range(0, len(refs), SCAN_BLOCK):
        block = refs[start : start + SCAN_BLOCK]
        pairs = [(r, b) for r, b in zip(block, db.vector_blobs(layout, block)) if b and len(b) == size]
        if not pairs:
            continue
        matrix = _matrix([b for _, b in pairs], len(q), layout)
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        sims = (matrix @ q) / norms
        for i in np.argsort(-sims)[:limit]:
            best[pairs[int(i)][0].rowid] = float(sims[i])
        if len(best) > limit:
            best = dict(sorted(best.items(), key=lambda kv: -kv[1])[:limit])
    return _hydrate(db, list(best), where, lambda rowid: best[rowid])


def _matrix(blobs: list[bytes], dims: int, layout: VectorLayout) -> np.ndarray:
    """Stored vectors as one float32 matrix (a copy: the blobs are read-only bytes)."""
    import numpy as np

    raw = np.frombuffer(b"".join(blobs), dtype=np.float16 if layout.encoding == "float16" else np.float32)
    return raw.reshape(len(blobs), dims).astype(np.float32)


def _chunk_rows(db: IndexDB, rowids: list[int], scope: Scope) -> list[_Row]:
    """The chunks' rows the scope allows, by rowid (the order SQLite returns an IN list in)."""
    if not rowids:
        return []
    clause, args = scope.sql()
    marks = ",".join("?" * len(rowids))
    return rows(db.conn, f"SELECT {_COLUMNS} FROM chunks c WHERE c.rowid IN ({marks}){clause}", (*rowids, *args))


def _hydrate(db: IndexDB, rowids: list[int], scope: Scope, score_of: Callable[[int], float]) -> list[Candidate]:
    found = _chunk_rows(db, rowids, scope)
    out = [Candidate(r[0], r[1], r[2], r[3], r[4], r[5], score_of(r[0])) for r in found]
    out.sort(key=lambda c: c.score, reverse=True)
    return out


class InProcessVectors:
    """All stored vectors as one normalised float32 matrix: the KNN while the matrix fits
    ``max_bytes`` (float32 in memory, whatever the file stores).

    A product over the vectors in memory takes ~1 ms at 10k × 384 (one BLAS thread: threads.py),
    against a scan of the vectors on disk per query. The matrix is refreshed only when the stored
    chunks change (``IndexDB.chunks_version``), not on every commit, and then only the new and
    changed rows are read: a stored vector never changes, so a chunk whose vector key is unchanged
    keeps its row.
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._version: tuple[int, str | None, int] | None = None
        self._rowids: Any = None  # NumPy arrays once loaded
        self._sources: Any = None
        self._paths: list[str] = []
        self._matrix: Any = None
        self._index: dict[int, tuple[int, object]] = {}  # chunk rowid -> (matrix row, vector key)
        #: Chunk rows the searches of one version of the chunks read (``_hydrate_known``).
        self._rows: dict[int, _Row] = {}
        self._rows_version: tuple[int, str | None, int] | None = None
        self._epoch: tuple[int, object, VectorLayout] | None = None  # (connection, providerKey, layout)
        self._counted: tuple[tuple[int, str | None, int], int] | None = None  # (version, chunks) for fits()
        self.loads = 0  # how many times the database was consulted after a change
        self.last_reread = 0  # vectors read from the database by the last load
        self.last_load_s = 0.0  # seconds the last load took (status, benchmarks)

    @property
    def loaded_vectors(self) -> int:
        return 0 if self._matrix is None else int(self._matrix.shape[0])

    @property
    def loaded_bytes(self) -> int:
        return 0 if self._matrix is None else int(self._matrix.nbytes)

    def fits(self, db: IndexDB, dims: int | None) -> bool:
        """Whether the index's vectors fit the memory budget (always True without a budget)."""
        if self.max_bytes is None:
            return True
        if not dims or self.max_bytes <= 0:
            return False
        with self._lock:
            version = self._current_version(db)
            if self._version is not None and self._version == version:
                return self.loaded_bytes <= self.max_bytes
            # COUNT(*) reads a whole index b-tree (~10 ms at 1M chunks): once per version of the chunks
            if self._counted is None or self._counted[0] != version:
                self._counted = (version, db.chunk_count())
            count = self._counted[1]
        return count * dims * 4 <= self.max_bytes

    @staticmethod
    def _current_version(db: IndexDB) -> tuple[int, str | None, int]:
        """What the loaded matrix must match: the connection and the chunks' version token (an index
        written before tokens existed falls back to SQLite's data_version)."""
        token = db.chunks_version()
        return (id(db), token, db.data_version() if token is None else 0)

    def load(self, db: IndexDB) -> None:
        """Bring the matrix up to date now (a warm-up; searches do it on demand)."""
        with self._lock:
            self._load(db)

    def _load(self, db: IndexDB) -> None:
        import time

        import numpy as np

        version = self._current_version(db)
        if version == self._version:
            return
        started = time.perf_counter()
        meta = db.read_meta() or {}
        layout, refs = db.vector_refs()
        self.loads += 1
        epoch = (id(db), meta.get("providerKey"), layout)
        reuse = epoch == self._epoch and self._matrix is not None and self._matrix.shape[1] > 0
        old = self._index if reuse else {}
        keep: list[int] = []  # matrix rows kept
        kept_refs: list[VectorRef] = []
        fetch: list[VectorRef] = []
        for ref in refs:
            hit = old.get(ref.rowid)
            if hit is not None and hit[1] == ref.key:
                keep.append(hit[0])
                kept_refs.append(ref)
            else:
                fetch.append(ref)
        blobs = db.vector_blobs(layout, fetch)
        width = bytes_per_dim(layout.encoding)
        dims = int(self._matrix.shape[1]) if keep else max((len(b) for b in blobs if b), default=0) // width
        fetched_refs = [r for r, b in zip(fetch, blobs) if b and len(b) == dims * width]
        fetched = self._normalised([b for b in blobs if b and len(b) == dims * width], dims, layout)
        positions = np.asarray(keep, dtype=np.int64)
        if len(positions) and positions[0] == 0 and np.all(np.diff(positions) == 1):
            kept = self._matrix[: len(positions)]  # nothing before them removed: a view, no copy
        else:
            kept = self._matrix[positions] if len(positions) else np.zeros((0, dims), dtype=np.float32)
        self._matrix = np.concatenate([kept, fetched]) if len(fetched) else kept
        order = kept_refs + fetched_refs  # rows in the order they were assembled
        self._rowids = np.asarray([r.rowid for r in order], dtype=np.int64)
        self._sources = np.array([r.source for r in order], dtype=object)
        self._paths = [r.path for r in order]
        self._index = {r.rowid: (pos, r.key) for pos, r in enumerate(order)}
        self._epoch = epoch
        self._version = version
        self.last_reread = len(fetched_refs)
        self.last_load_s = time.perf_counter() - started

    @staticmethod
    def _normalised(blobs: list[bytes], dims: int, layout: VectorLayout) -> np.ndarray:
        import numpy as np

        if not blobs or not dims:
            return np.zeros((0, dims), dtype=np.float32)
        matrix = _matrix(blobs, dims, layout)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        matrix /= norms
        return matrix

    def search(self, db: IndexDB, query_vec: np.ndarray, limit: int, scope: ScopeLike) -> list[Candidate]:
        import numpy as np

        where = as_scope(scope)
        threads.configure()  # one BLAS thread: a matrix-vector product is query-sized work
        with self._lock:
            self._load(db)
            if self._matrix is None or self._matrix.size == 0 or self._matrix.shape[1] != len(query_vec):
                return []
            q = np.asarray(query_vec, dtype=np.float32)
            norm = float(np.linalg.norm(q)) or 1.0
            sims = self._matrix @ (q / norm)
            allowed = where.mask(self._sources, self._paths)
            if allowed is not None:
                sims = np.where(allowed, sims, -np.inf)
            count = min(limit, len(sims))
            top = np.argpartition(-sims, count - 1)[:count] if count < len(sims) else np.arange(len(sims))
            best = sims[top]
            finite = np.isfinite(best)
            if not finite.all():
                top, best = top[finite], best[finite]
            # one conversion per array, not per element: the same ints and floats, in the same order
            scores = dict(zip(self._rowids[top].tolist(), best.tolist()))
            if where.restricted:  # (the mask filtered the rows; the query's clause says so again)
                known: dict[int, _Row] | None = None
            else:
                if self._rows_version != self._version:
                    self._rows, self._rows_version = {}, self._version
                known = self._rows
        if known is None:
            return _hydrate(db, list(scores), where, lambda rowid: scores[rowid])
        return self._hydrate_known(db, scores, known)

    def _hydrate_known(self, db: IndexDB, scores: dict[int, float], known: dict[int, _Row]) -> list[Candidate]:
        """``_hydrate`` of an unrestricted search from the rows read for earlier searches of this
        version of the chunks (the same rows come back search after search; reading 60 of them was
        ~0.4 ms of a 200-chunk search), in the order the query returns them (by rowid, then by score)."""
        missing = [rowid for rowid in scores if rowid not in known]
        if missing:
            found = _chunk_rows(db, missing, as_scope(None))
            with self._lock:
                if known is self._rows:  # not a newer version's meanwhile
                    for row in found:
                        if len(known) >= KNOWN_ROWS:
                            del known[next(iter(known))]  # the oldest read first
                        known[row[0]] = row
            read = {row[0]: row for row in found}
        else:
            read = {}
        out = []
        for rowid in sorted(scores):
            stored = read.get(rowid) or known.get(rowid)
            if stored is not None:  # gone since the matrix was loaded: as the query would, left out
                out.append(Candidate(stored[0], stored[1], stored[2], stored[3], stored[4], stored[5], scores[rowid]))
        out.sort(key=lambda c: c.score, reverse=True)
        return out
