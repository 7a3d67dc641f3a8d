"""The LanceDB table of long-term memories: schema, one table per embedding model, safe writes.

Rows: ``{id, text, vector, importance, category, createdAt}`` (the seed's ``MemoryEntry``) plus
``agentId`` (whose memory), ``source`` (capture, tool, import), ``sessionKey``, ``provenance`` (JSON:
role, message index, redaction, ...) and ``textHash`` (exact-duplicate key).

* **One table per model.** The table is ``<tableName>_<key>``, ``key`` a hash of the provider's
  identity and dimensions, recorded in the schema metadata too. Opening with another model finds
  the other tables, re-embeds their rows into a new table created in one commit, then drops them:
  vectors of two models never meet in one table (the reference corrupted its table instead).
* **Writes survive concurrency.** Every commit is retried on a commit conflict (another process
  committed first) with jittered backoff. On a local folder, the duplicate check and its insert run
  under an OS file lock, so concurrent writers cannot both insert the same memory.
* **Forgetting is physical.** A LanceDB delete only marks rows; :meth:`purge` rewrites the fragments
  that held them (one merge-insert commit), rebuilds the full-text index and removes every older
  version's files, so no byte of the text is left in the table's directory.
* **Bounded growth.** :meth:`maintain` compacts small fragments, folds new rows into the full-text
  index and deletes versions older than ``keepVersionsMinutes``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import random
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mdrecall.backends.lancedb.capture import normalized_key
from mdrecall.backends.lancedb.results import is_memory_id
from mdrecall.embeddings.base import provider_key
from mdrecall.errors import StoreError

log = logging.getLogger("mdrecall.lancedb")

META_IDENTITY = b"mdrecall.identity"
META_DIMS = b"mdrecall.dims"
COLUMNS = ("id", "text", "importance", "category", "createdAt", "agentId", "source", "sessionKey", "provenance", "textHash")
EmbedFn = Callable[[Sequence[str]], list[list[float]]]


def text_hash(text: str) -> str:
    return hashlib.sha1(normalized_key(text).encode("utf-8")).hexdigest()[:16]


def quote(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"


def schema_for(dims: int, identity: dict[str, Any]) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dims), nullable=False),
            pa.field("importance", pa.float32()),
            pa.field("category", pa.string()),
            pa.field("createdAt", pa.int64()),
            pa.field("agentId", pa.string()),
            pa.field("source", pa.string()),
            pa.field("sessionKey", pa.string()),
            pa.field("provenance", pa.string()),
            pa.field("textHash", pa.string()),
        ],
        metadata={META_IDENTITY: json.dumps(identity, sort_keys=True).encode(), META_DIMS: str(dims).encode()},
    )


def unit_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """Vectors scaled to length 1, so cosine distance is ``1 - dot`` whatever the provider returns."""
    m = np.asarray(vectors, dtype=np.float32)
    if m.ndim != 2:
        raise StoreError("embedding provider returned no vectors")
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def is_conflict(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "conflict" in text or "retryable" in text or "concurrent" in text


def is_missing_file(exc: BaseException) -> bool:
    # A reader on a version whose files another process just cleaned up: read the latest again.
    text = str(exc).lower()
    return "not found" in text or "no such file" in text or "does not exist" in text


@dataclass
class Row:
    id: str
    text: str
    importance: float
    category: str
    created_at: int
    agent_id: str
    source: str
    session_key: str | None
    provenance: dict[str, Any]
    score: float | None = None

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Row:
        score = None
        if rec.get("_distance") is not None:
            score = max(0.0, min(1.0, 1.0 - float(rec["_distance"])))
        try:
            provenance = json.loads(rec.get("provenance") or "{}")
        except ValueError:
            provenance = {}
        return cls(
            id=rec["id"], text=rec["text"], importance=float(rec.get("importance") or 0.0),
            category=rec.get("category") or "other", created_at=int(rec.get("createdAt") or 0),
            agent_id=rec.get("agentId") or "", source=rec.get("source") or "", session_key=rec.get("sessionKey"),
            provenance=provenance if isinstance(provenance, dict) else {}, score=score,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "text": self.text, "category": self.category, "importance": round(self.importance, 3),
            "createdAt": self.created_at, "agentId": self.agent_id, "source": self.source,
            "sessionKey": self.session_key, "provenance": self.provenance,
        }
        if self.score is not None:
            out["score"] = round(self.score, 4)
        return out


def new_record(
    text: str, vector: np.ndarray, *, importance: float, category: str, agent_id: str, source: str,
    session_key: str | None, provenance: dict[str, Any], memory_id: str | None = None, created_at: int | None = None,
) -> dict[str, Any]:
    return {
        "id": memory_id or str(uuid.uuid4()),
        "text": text,
        "vector": vector.astype(np.float32).tolist(),
        "importance": float(importance),
        "category": category,
        "createdAt": int(created_at if created_at is not None else time.time() * 1000),
        "agentId": agent_id,
        "source": source,
        "sessionKey": session_key,
        "provenance": json.dumps(provenance, ensure_ascii=False, sort_keys=True),
        "textHash": text_hash(text),
    }


class LanceStore:
    """One LanceDB database (a folder or an object-store prefix) and the active memories table."""

    def __init__(self, uri: str, *, storage_options: dict[str, str] | None = None, prefix: str = "memories",
                 retries: int = 10) -> None:
        import lancedb

        self.uri = uri
        self.prefix = prefix
        self.retries = retries
        self.local = "://" not in uri or uri.startswith("file://")
        self.storage_options = dict(storage_options or {})
        if self.local:
            Path(uri.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
        try:
            # read_consistency_interval=0: every read sees the latest commit of any process.
            self.db = lancedb.connect(uri, storage_options=self.storage_options or None,
                                      read_consistency_interval=timedelta(0))
        except Exception as exc:
            raise StoreError(f"cannot open LanceDB at {uri}: {exc}") from exc
        self.table: Any = None
        self.name: str | None = None
        self.dims: int | None = None
        self.migration: dict[str, Any] | None = None
        self._mutex = threading.RLock()
        self.commits = 0
        self.conflicts_retried = 0

    # -- locking and retries -----------------------------------------------------------------------

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """This process's writers in turn; on a local folder, other processes' too (flock)."""
        with self._mutex:
            if not self.local:
                yield
                return
            path = Path(self.uri.removeprefix("file://")) / f".{self.prefix}.write.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def commit(self, what: str, action: Callable[[], Any]) -> Any:
        """Run a write, retrying commit conflicts with jittered exponential backoff."""
        delay = 0.02
        for attempt in range(self.retries + 1):
            try:
                result = action()
                self.commits += 1
                return result
            except Exception as exc:
                stale = is_missing_file(exc)  # our version's files were cleaned up by another process
                if not (is_conflict(exc) or stale) or attempt == self.retries:
                    raise StoreError(f"LanceDB {what} failed: {exc}") from exc
                if stale and self.table is not None:
                    with contextlib.suppress(Exception):
                        self.table.checkout_latest()
                self.conflicts_retried += 1
                log.info("%s: commit conflict (attempt %d), retrying: %s", what, attempt + 1, exc)
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")

    def read(self, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except Exception as exc:
            if not is_missing_file(exc):
                raise
            with contextlib.suppress(Exception):
                self.table.checkout_latest()
            return action()

    # -- tables ------------------------------------------------------------------------------------

    def table_names(self) -> list[str]:
        response = self.db.list_tables(limit=None)
        names: list[str] = [str(n) for n in getattr(response, "tables", response)]
        return sorted(n for n in names if n.startswith(self.prefix + "_"))

    def open_named(self, name: str) -> None:
        self.table, self.name = self.db.open_table(name), name

    def open_any(self) -> None:
        """Open some model's table, for reads that need no vectors (keyword search, listing)."""
        names = self.table_names()
        if names:
            self.open_named(names[0])

    def table_name_for(self, identity: dict[str, Any], dims: int) -> str:
        return f"{self.prefix}_{provider_key({**identity, 'dims': dims})[:12]}"

    def open(self, identity: dict[str, Any], dims: int, embed: EmbedFn | None) -> None:
        """Open (or create) the table for this model; rows of other models' tables are re-embedded into it."""
        name = self.table_name_for(identity, dims)
        schema = schema_for(dims, identity)
        with self.write_lock():
            names = self.table_names()
            foreign = [n for n in names if n != name]
            if name in names:
                self.table = self.db.open_table(name)
            elif not foreign:
                with contextlib.suppress(Exception):
                    self.table = self.db.create_table(name, schema=schema, exist_ok=True)
                if self.table is None:
                    self.table = self.db.open_table(name)
            self.name, self.dims = name, dims
            if foreign:
                if embed is None:
                    raise StoreError("the memories were embedded with another model; an embedding provider is needed to migrate them")
                self._absorb(name, schema, foreign, embed)

    def _absorb(self, name: str, schema: pa.Schema, foreign: list[str], embed: EmbedFn) -> None:
        started = time.time()
        rows: dict[str, dict[str, Any]] = {}
        for other in foreign:
            data = self.db.open_table(other).to_arrow().select(list(COLUMNS)).to_pylist()
            for rec in data:
                rows.setdefault(rec["id"], rec)
        if self.table is not None and rows:
            present = set(self.table.to_arrow().column("id").to_pylist())
            rows = {k: v for k, v in rows.items() if k not in present}
        records = list(rows.values())
        vectors: list[np.ndarray] = []
        for start in range(0, len(records), 64):
            batch = records[start : start + 64]
            vectors.extend(unit_rows(embed([r["text"] for r in batch])))
        for rec, vec in zip(records, vectors):
            rec["vector"] = vec.tolist()
        data = pa.Table.from_pylist(records, schema=schema) if records else None
        if self.table is None:
            # Created with every row in one commit: no process ever sees a half-migrated table.
            try:
                self.table = self.db.create_table(name, data=data, schema=schema)
            except Exception:
                self.table = self.db.open_table(name)
                if data is not None:
                    self._insert_missing(data)
        elif data is not None:
            self._insert_missing(data)
        for other in foreign:
            with contextlib.suppress(Exception):
                self.db.drop_table(other)
        self.migration = {"from": foreign, "to": name, "rows": len(records), "seconds": round(time.time() - started, 3)}
        log.warning("lancedb: migrated %d memories from %s to %s", len(records), ", ".join(foreign), name)

    def _insert_missing(self, data: pa.Table) -> None:
        self.commit("migration insert", lambda: self.table.merge_insert("id").when_not_matched_insert_all().execute(data))

    @property
    def identity(self) -> dict[str, Any] | None:
        if self.table is None:
            return None
        raw = (self.table.schema.metadata or {}).get(META_IDENTITY)
        return json.loads(raw) if raw else None

    # -- writes ------------------------------------------------------------------------------------

    def add(self, records: Sequence[dict[str, Any]]) -> None:
        if not records:
            return
        data = pa.Table.from_pylist(list(records), schema=self.table.schema)
        self.commit("add", lambda: self.table.add(data))

    def purge(self, ids: Sequence[str]) -> int:
        """Delete rows so that no byte of them is left in any version, index or data file."""
        ids = [i for i in ids if is_memory_id(i)]
        if not ids:
            return 0
        with self.write_lock():
            removed = self.commit("forget", lambda: self._rewrite_without(ids))
            self._rebuild_fts()
            # Versions older than now hold the text: remove them all. Unreferenced ("unverified") files
            # may be another writer's commit in progress, so LanceDB keeps them for 7 days; on a folder
            # every writer holds this lock, so there is none, and leftovers of a crashed or failed
            # write (which may hold the text) go too. On an object store they are kept (docs/lancedb.md).
            self.commit("cleanup", lambda: self._optimize(timedelta(0), purge_unverified=self.local))
        return removed

    def _rewrite_without(self, ids: Sequence[str]) -> int:
        id_list = ", ".join(quote(i) for i in ids)
        found = self.read(lambda: self.table.search().where(f"id IN ({id_list})").with_row_address(True)
                          .select(["id", "_rowaddr"]).limit(None).to_arrow())
        if found.num_rows == 0:
            return 0
        fragments = sorted({int(a) >> 32 for a in found.column("_rowaddr").to_pylist()})
        ranges = " OR ".join(f"(_rowaddr >= {f << 32} AND _rowaddr < {(f + 1) << 32})" for f in fragments)
        neighbours = (self.table.search().where(f"({ranges}) AND id NOT IN ({id_list})").with_row_address(True)
                      .select([*self.table.schema.names, "_rowaddr"]).limit(None).to_arrow())
        keep = neighbours.drop_columns(["_rowaddr"]).select(self.table.schema.names).cast(self.table.schema)
        # One commit: the fragments' other rows are rewritten (update) and the forgotten ones deleted,
        # so the old fragments end fully deleted and drop out of the table.
        (self.table.merge_insert("id").when_matched_update_all()
         .when_not_matched_by_source_delete(f"id IN ({id_list})").execute(keep))
        return found.num_rows

    def _rebuild_fts(self) -> None:
        from lancedb.index import FTS

        if self.table.count_rows() == 0:
            self._drop_fts()
            return
        self.commit("full-text index", lambda: self.table.create_index("text", config=FTS(), replace=True))

    def _drop_fts(self) -> None:
        for index in self.table.list_indices():
            if index.index_type == "FTS":
                with contextlib.suppress(Exception):
                    self.table.drop_index(index.name)

    def _optimize(self, keep: timedelta, purge_unverified: bool = False) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "cleanup_older_than=0 removes every version": meant
            return self.table.optimize(cleanup_older_than=keep, delete_unverified=purge_unverified)

    def maintain(self, keep: timedelta) -> dict[str, Any]:
        """Compact, refresh the full-text index, drop exact duplicates, delete old versions."""
        started = time.time()
        before = self.version_count()
        with self.write_lock():
            dropped = self._drop_exact_duplicates()
            if self.table.count_rows() and not any(i.index_type == "FTS" for i in self.table.list_indices()):
                self._rebuild_fts()
            self.commit("optimize", lambda: self._optimize(keep))
        return {"versionsBefore": before, "versionsAfter": self.version_count(), "duplicatesDropped": dropped,
                "seconds": round(time.time() - started, 3)}

    def _drop_exact_duplicates(self) -> int:
        # Writers on an object store cannot lock each other out; two that stored the same text at
        # the same moment both succeed. Keep the oldest copy.
        data = self.table.to_arrow().select(["id", "textHash", "agentId", "createdAt"]).to_pylist()
        first: dict[tuple[str, str], tuple[int, str]] = {}
        extra: list[str] = []
        for rec in sorted(data, key=lambda r: (r["createdAt"] or 0, r["id"])):
            key = (rec["agentId"] or "", rec["textHash"] or "")
            if key in first:
                extra.append(rec["id"])
            else:
                first[key] = (rec["createdAt"], rec["id"])
        if extra:
            id_list = ", ".join(quote(i) for i in extra)
            self.commit("dedupe", lambda: self.table.delete(f"id IN ({id_list})"))
        return len(extra)

    # -- reads -------------------------------------------------------------------------------------

    def _records(self, query: Any) -> list[dict[str, Any]]:
        return self.read(lambda: query.to_list())

    def nearest(self, vector: np.ndarray, agent_id: str, limit: int, where: str | None = None) -> list[Row]:
        if self.table is None:
            return []
        clause = f"agentId = {quote(agent_id)}" + (f" AND ({where})" if where else "")
        q = (self.table.search(vector.astype(np.float32), vector_column_name="vector").distance_type("cosine")
             .where(clause, prefilter=True).select([*COLUMNS, "_distance"]).limit(limit))
        return [Row.from_record(r) for r in self._records(q)]

    def keyword(self, query: str, agent_id: str, limit: int) -> list[tuple[Row, float]]:
        if self.table is None or not query.strip():
            return []
        try:
            q = (self.table.search(query, query_type="fts").where(f"agentId = {quote(agent_id)}", prefilter=True)
                 .select([*COLUMNS, "_score"]).limit(limit))
            return [(Row.from_record(r), float(r.get("_score") or 0.0)) for r in self._records(q)]
        except Exception as exc:  # no full-text index yet
            log.debug("lancedb keyword search unavailable: %s", exc)
            return []

    def by_hash(self, digest: str, agent_id: str) -> Row | None:
        q = self.table.search().where(f"textHash = {quote(digest)} AND agentId = {quote(agent_id)}").select(list(COLUMNS)).limit(1)
        rows = self._records(q)
        return Row.from_record(rows[0]) if rows else None

    def get(self, memory_id: str, agent_id: str | None = None) -> Row | None:
        if self.table is None or not is_memory_id(memory_id):
            return None
        clause = f"id = {quote(memory_id)}" + (f" AND agentId = {quote(agent_id)}" if agent_id else "")
        rows = self._records(self.table.search().where(clause).select(list(COLUMNS)).limit(1))
        return Row.from_record(rows[0]) if rows else None

    def rows(self, agent_id: str | None, *, category: str | None = None, limit: int | None = None,
             offset: int = 0) -> list[Row]:
        if self.table is None:
            return []
        clauses = []
        if agent_id is not None:
            clauses.append(f"agentId = {quote(agent_id)}")
        if category:
            clauses.append(f"category = {quote(category)}")
        q = self.table.search()
        if clauses:
            q = q.where(" AND ".join(clauses))
        data = self._records(q.select(list(COLUMNS)).limit(None))
        data.sort(key=lambda r: (-(r.get("createdAt") or 0), r["id"]))
        data = data[offset : offset + limit if limit is not None else None]
        return [Row.from_record(r) for r in data]

    def count(self, agent_id: str | None = None) -> int:
        if self.table is None:
            return 0
        return int(self.read(lambda: self.table.count_rows(f"agentId = {quote(agent_id)}" if agent_id else None)))

    def version_count(self) -> int:
        return len(self.read(lambda: self.table.list_versions())) if self.table is not None else 0

    def stats(self) -> dict[str, Any]:
        if self.table is None:
            return {"table": None}
        s = self.read(lambda: self.table.stats())
        frag = s.get("fragment_stats", {}) if isinstance(s, dict) else {}
        indices = [{"name": i.name, "type": i.index_type, "unindexedRows": getattr(i, "num_unindexed_rows", None)}
                   for i in self.table.list_indices()]
        return {
            "table": self.name,
            "rows": int(s.get("num_rows", 0)) if isinstance(s, dict) else None,
            "dataBytes": int(s.get("total_bytes", 0)) if isinstance(s, dict) else None,
            "fragments": frag.get("num_fragments"),
            "versions": self.version_count(),
            "version": self.table.version,
            "indices": indices,
            "commits": self.commits,
            "conflictsRetried": self.conflicts_retried,
        }

    def table_uri(self) -> str:
        return f"{self.uri.rstrip('/')}/{self.name}.lance"
