"""An approximate vector index beside the SQLite file, for indexes past the in-memory vector budget.

Below ``store.vector.memoryCacheMiB`` every search compares the query with every vector (the
in-memory matrix, vector.py): exact, ~1 ms at 10k. Past it, a scan of the stored vectors costs ~1 s
at 1M chunks. There an HNSW graph (faiss-cpu, the ``ann`` extra; chosen by measurement,
docs/benchmarks.md "Approximate vector index") finds the candidates, and each candidate is scored
again, exactly, from its stored vector, so scores are the exact path's; only which chunks make the
candidate list can differ (recall@10 against exact, measured).

The graph is never the source of truth:

* it lives in ``<index>.ann`` (the graph), ``<index>.ann.keys.npy`` (chunk rowid and vector key of
  every entry) and ``<index>.ann.json`` (written last: what it was built from: the chunks' version
  token, provider key, dimensions, count). Each is written to a temporary file and renamed;
* a search uses it only when it matches the index exactly (same chunks version, provider key and
  vector layout); otherwise the search scans, and a background thread brings the graph up to date:
  entries whose chunk is gone or whose vector changed are dropped, new ones added (a sync of a few
  files costs a few milliseconds of graph updates, plus one read of the chunk list);
* missing, unreadable or inconsistent files are rebuilt from the stored vectors, in the background.

A restricted scope (sources, one session's transcripts) searches ten times as many candidates and
scans when fewer than asked for survive the filter.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdrecall import threads
from mdrecall.search.keyword import Candidate
from mdrecall.search.scope import ScopeLike, as_scope
from mdrecall.store.db import IndexDB, StoreOptions, VectorLayout

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

#: Candidates asked of the graph per result wanted (then scored exactly).
OVERSAMPLE = 4
#: The same for a restricted scope, whose filter drops candidates after the graph.
OVERSAMPLE_RESTRICTED = 10
#: Graph parameters (measured: benchmarks/ann.py): neighbours per node, search widths.
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 96
FORMAT = 1
ADD_BATCH = 8192
#: Deleted entries (share of the graph) after which it is rebuilt rather than patched.
REBUILD_AFTER_REMOVED = 0.25


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("faiss") is not None


class ApproximateVectors:
    """The graph of one index file; ``search`` answers only when it is up to date (else None)."""

    def __init__(self, db_path: Path, options: StoreOptions) -> None:
        self.db_path = db_path
        self.options = options
        self.graph_path = Path(f"{db_path}.ann")
        self.keys_path = Path(f"{db_path}.ann.keys.npy")
        self.meta_path = Path(f"{db_path}.ann.json")
        self._lock = threading.Lock()  # the graph and its keys, between searches and the updater
        # One update at a time, whoever runs it (the background worker, a direct caller): two would
        # write the same temporary files (measured: the second rename failed).
        self._updating = threading.Lock()
        self._index: Any = None
        self._keys: Any = None  # int64 [n, 2]: chunk rowid, vector key
        self._built_for: dict[str, Any] | None = None
        self._worker: threading.Thread | None = None
        self._again = False  # an update was asked for since the running one read the index
        self._stop = threading.Event()
        self.last_error: str | None = None
        self.last_update: dict[str, Any] | None = None
        self.searches = 0  # searches the graph answered (status, tests)

    # -- status -----------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        built = self._built_for or {}
        return {
            "available": available(),
            "entries": int(built.get("count", 0)),
            "chunksVersion": built.get("chunksVersion"),
            "updating": self._worker is not None and self._worker.is_alive(),
            "searches": self.searches,
            "lastUpdate": self.last_update,
            "lastError": self.last_error,
            "path": str(self.graph_path),
        }

    # -- search -----------------------------------------------------------------------------------
    def search(self, db: IndexDB, query_vec: np.ndarray, limit: int, scope: ScopeLike) -> list[Candidate] | None:
        """The ``limit`` best chunks by exact cosine among the graph's candidates, or None when the
        graph does not match the index now (an update is then started in the background)."""
        import numpy as np

        from mdrecall.search.vector import _hydrate, _matrix

        wanted = _identity(db)
        if wanted is None:
            return None
        where = as_scope(scope)
        with self._lock:
            if self._index is None and self._built_for is None:
                self._load()
            if self._index is None or not _matches(self._built_for, wanted):
                ready = False
            else:
                ready = True
                threads.configure()
                q = np.asarray(query_vec, dtype=np.float32)
                q = q / (float(np.linalg.norm(q)) or 1.0)
                count = max(limit, 1) * (OVERSAMPLE_RESTRICTED if where.restricted else OVERSAMPLE)
                rowids = self._index.search(q, count)
        if not ready:
            self.update_in_background()
            return None
        self.searches += 1
        if not rowids:
            return []
        layout = VectorLayout(False, db.vector_encoding())
        clause, args = where.sql()
        marks = ",".join("?" * len(rowids))
        refs = list(db.conn.execute(
            f"SELECT c.rowid, c.vector_id, v.embedding FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id "
            f"WHERE c.rowid IN ({marks}){clause}",
            (*rowids, *args),
        ))
        size = len(q) * (2 if layout.encoding == "float16" else 4)
        refs = [r for r in refs if r[2] is not None and len(r[2]) == size]
        if where.restricted and len(refs) < limit:
            return None  # the filter left too few: the caller scans
        if not refs:
            return []
        matrix = _matrix([r[2] for r in refs], len(q), layout)
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        sims = (matrix @ q) / norms
        order = np.argsort(-sims)[:limit]
        scores = {int(refs[i][0]): float(sims[i]) for i in order}
        return _hydrate(db, list(scores), where, lambda rowid: scores[rowid])

    # -- keeping it up to date ----------------------------------------------------------------------
    def update_in_background(self) -> None:
        """Bring the graph up to date with the index on a background thread (one at a time)."""
        if not available() or self._stop.is_set():
            return
        with self._lock:
            self._again = True  # a running worker goes round once more: the index moved meanwhile
            if self._worker is not None and self._worker.is_alive():
                return
            self._worker = threading.Thread(target=self._update_safely, name="mdrecall-ann-update", daemon=True)
            self._worker.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a running update (benchmarks, tests); True when none is running any more."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
            return not worker.is_alive()
        return True

    def close(self) -> None:
        self._stop.set()
        self.wait(10.0)

    def _update_safely(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if not self._again:
                    return
                self._again = False
            try:
                self.update()
            except Exception as exc:  # never break search: it scans meanwhile
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("mdrecall: approximate vector index not updated: %s", exc)
                return

    def update(self) -> dict[str, Any]:
        """Make the graph match the index now (on the calling thread; after any update already
        running): apply the differences, or build it from the stored vectors when there is none, it
        cannot be read, or deletions have worn it (more than REBUILD_AFTER_REMOVED of its entries)."""
        with self._updating:
            return self._update()

    def _update(self) -> dict[str, Any]:
        import numpy as np

        started = time.perf_counter()
        db = IndexDB(self.db_path, self.options)
        try:
            with db.conn:  # one read transaction: the chunk list and its version agree
                wanted = _identity(db)
                rows = list(db.conn.execute("SELECT rowid, vector_id FROM chunks WHERE vector_id IS NOT NULL")) if wanted else []
            if wanted is None:
                return {"skipped": "no vectors"}
            refs = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
            with self._lock:
                if self._index is None and self._built_for is None:
                    self._load()
                index, keys, built = self._index, self._keys, self._built_for
            rebuild = (
                index is None or keys is None or not built
                or any(built.get(k) != wanted.get(k) for k in ("providerKey", "dims", "encoding"))
                or int(built.get("removed", 0)) > REBUILD_AFTER_REMOVED * max(1, int(built.get("count", 0)))
            )
            if rebuild or built is None:
                index, keys, removed_before = _new_index(int(wanted["dims"])), np.zeros((0, 2), dtype=np.int64), 0
            else:
                removed_before = int(built.get("removed", 0))
            # (rowid, vector key) pairs as one int64 each: what the graph holds that the index no
            # longer has, and what it lacks (a reused rowid with another vector is both)
            have, now = _pairs(keys), _pairs(refs)
            gone = keys[np.isin(have, now, invert=True)][:, 0]
            kept = keys[np.isin(have, now)]
            new = refs[np.isin(now, have, invert=True)]
            if not rebuild and not len(gone) and not len(new) and _matches(built, wanted):
                # Nothing moved (a search asked again while an update ran): keep the files and the
                # record of the last real update.
                return {"unchanged": True, "entries": int(len(keys))}
            index.remove(gone)
            layout = VectorLayout(False, str(wanted["encoding"]))
            added: list[Any] = []
            for start in range(0, len(new), ADD_BATCH):
                if self._stop.is_set():
                    return {"stopped": True}
                batch = new[start : start + ADD_BATCH]
                vectors = _stored(db, layout, [int(v) for v in batch[:, 1]], int(wanted["dims"]))
                present = [i for i, v in enumerate(vectors) if v is not None]
                if present:
                    matrix = np.stack([v for v in vectors if v is not None])
                    index.add(batch[present, 0], matrix, threads.document_workers())
                    added.append(batch[present])
        finally:
            db.close()
        keys = np.concatenate([kept, *added]) if added else kept
        built = {**wanted, "count": int(len(keys)), "entries": index.entries, "removed": removed_before + int(len(gone)), "format": FORMAT}
        self._save(index, keys, built)
        with self._lock:
            self._index, self._keys, self._built_for = index, keys, built
        self.last_error = None
        self.last_update = {"rebuilt": rebuild, "added": int(sum(len(a) for a in added)), "removed": int(len(gone)),
                            "entries": int(len(keys)), "seconds": round(time.perf_counter() - started, 2), "at": time.time()}
        return self.last_update

    # -- files --------------------------------------------------------------------------------------
    def _load(self) -> None:
        """Read the graph from its files (lock held); anything wrong leaves it unloaded (rebuilt)."""
        import numpy as np

        self._built_for = {}  # tried: do not read again on every search
        if not (self.meta_path.exists() and self.graph_path.exists() and self.keys_path.exists()) or not available():
            return
        try:
            built = json.loads(self.meta_path.read_text(encoding="utf-8"))
            keys = np.load(self.keys_path, allow_pickle=False)
            index = _Graph.load(self.graph_path, int(built["dims"]))
            if built.get("format") != FORMAT or index.entries != built.get("entries") or keys.shape != (built.get("count"), 2):
                raise ValueError(f"{self.graph_path.name} does not match {self.meta_path.name}")
        except Exception as exc:
            self.last_error = f"unreadable, rebuilt from the stored vectors: {type(exc).__name__}: {exc}"
            return
        self._index, self._keys, self._built_for = index, keys, built

    def _save(self, index: Any, keys: Any, built: dict[str, Any]) -> None:
        import numpy as np

        self.meta_path.unlink(missing_ok=True)  # the files are inconsistent until the new meta lands
        tmp_graph = self.graph_path.with_name(self.graph_path.name + ".tmp")
        tmp_keys = self.keys_path.with_name(self.keys_path.name + ".tmp.npy")
        tmp_meta = self.meta_path.with_name(self.meta_path.name + ".tmp")
        index.save(tmp_graph)
        np.save(tmp_keys, keys, allow_pickle=False)
        tmp_meta.write_text(json.dumps(built), encoding="utf-8")
        os.replace(tmp_graph, self.graph_path)
        os.replace(tmp_keys, self.keys_path)
        os.replace(tmp_meta, self.meta_path)

    def remove_files(self) -> None:
        for path in (self.graph_path, self.keys_path, self.meta_path):
            path.unlink(missing_ok=True)


def _identity(db: IndexDB) -> dict[str, Any] | None:
    """What a graph must have been built from to answer for ``db`` now (None: no schema-3 vectors)."""
    if db.legacy_layout():
        return None
    dims = db.vec_dims()
    if not dims:
        return None
    meta = db.read_meta() or {}
    return {"chunksVersion": db.chunks_version(), "providerKey": meta.get("providerKey"), "dims": int(dims),
            "encoding": db.vector_encoding()}


def _matches(built: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    return built is not None and all(built.get(k) == v for k, v in wanted.items())


def _pairs(refs: np.ndarray) -> np.ndarray:
    """(rowid, vector key) rows as one int64 each (both stay far below 2**31 in practice)."""
    import numpy as np

    if len(refs) and (refs.max() >= 2**31 or refs.min() < 0):
        raise ValueError("rowids or vector keys beyond 2**31: cannot key the approximate index")
    return (refs[:, 0].astype(np.int64) << 32) | refs[:, 1].astype(np.int64)


def _new_index(dims: int) -> _Graph:
    return _Graph.new(dims)


class _Graph:
    """The library behind the graph, in one place: faiss's HNSW over float16 vectors (IDs: chunk
    rowids). faiss's HNSW cannot delete: a removed entry stays in the graph until the next rebuild
    (REBUILD_AFTER_REMOVED), harmless meanwhile, since every candidate is looked up in the index
    and scored from its stored vector (a chunk that is gone is dropped; a reused rowid gets its
    current vector's score)."""

    def __init__(self, index: Any) -> None:
        import faiss

        self.index = index
        self.inner: Any = None
        self.hnsw = faiss.downcast_index(index.index).hnsw  # type: ignore[attr-defined]  # the graph inside the ID map

    @classmethod
    def new(cls, dims: int) -> _Graph:
        import faiss

        quantizer: Any = faiss.ScalarQuantizer.QT_fp16  # an enum value; faiss's stubs type the argument wrongly
        inner = faiss.IndexHNSWSQ(dims, quantizer, CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = EXPANSION_ADD
        graph = cls(faiss.IndexIDMap2(inner))
        graph.inner = inner  # the ID map does not own it: keep it alive
        return graph

    @classmethod
    def load(cls, path: Path, dims: int) -> _Graph:
        import faiss

        index = faiss.read_index(str(path))
        if index.d != dims:
            raise ValueError(f"{path.name} holds {index.d}-dimension vectors, not {dims}")
        return cls(index)

    @property
    def entries(self) -> int:
        return int(self.index.ntotal)

    def add(self, keys: np.ndarray, vectors: np.ndarray, workers: int) -> None:
        import faiss
        import numpy as np

        if not self.index.is_trained:
            self.index.train(vectors)  # float16 needs no statistics; faiss asks all the same
        faiss.omp_set_num_threads(workers)  # a batch of documents: the document workers (threads.py)
        try:
            self.index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), np.ascontiguousarray(keys, dtype=np.int64))
        finally:
            faiss.omp_set_num_threads(1)

    def remove(self, keys: np.ndarray) -> None:
        """Nothing to do in the graph (see the class): the entries are dropped from ``keys``."""

    def search(self, q: np.ndarray, count: int) -> list[int]:
        import faiss

        if not self.entries:
            return []
        faiss.omp_set_num_threads(1)
        self.hnsw.efSearch = max(EXPANSION_SEARCH, count)
        _, ids = self.index.search(q.reshape(1, -1), min(count, self.entries))
        return list(dict.fromkeys(int(i) for i in ids[0] if i >= 0))  # a re-added rowid may come twice

    def save(self, path: Path) -> None:
        import faiss

        faiss.write_index(self.index, str(path))


def _stored(db: IndexDB, layout: VectorLayout, vector_ids: list[int], dims: int) -> list[np.ndarray | None]:
    """Unit float32 vectors of ``vector_ids`` from ``embedding_cache`` (None where unreadable)."""
    import numpy as np

    from mdrecall.search.vector import _matrix

    blobs: dict[int, bytes] = {}
    for start in range(0, len(vector_ids), 500):
        part = vector_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        blobs.update({int(r[0]): r[1] for r in db.conn.execute(f"SELECT rowid, embedding FROM embedding_cache WHERE rowid IN ({marks})", part)})
    size = dims * (2 if layout.encoding == "float16" else 4)
    out: list[np.ndarray | None] = []
    for vid in vector_ids:
        blob = blobs.get(vid)
        if blob is None or len(blob) != size:
            out.append(None)
            continue
        v = _matrix([blob], dims, layout)[0]
        out.append(v / (float(np.linalg.norm(v)) or 1.0))
    return out


__all__ = ["ApproximateVectors", "available"]
