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
* **Writes survive a flaky object store.** New rows go in with an insert-if-absent merge on ``id``,
  not a plain append: when a commit's answer is lost and LanceDB cannot tell whether it landed, its
  retry finds the rows there and adds nothing, where an append would have stored them twice.
* **Every LanceDB failure is a StoreError** naming the operation and the database, in one line
  (:func:`lance_errors`); a listed table folder with no manifest (a first commit cut before it
  landed) is not a table: it is skipped, and created afresh when it is the one needed.
* **Forgetting is physical.** A LanceDB delete only marks rows; :meth:`purge` rewrites the fragments
  that held them (one merge-insert commit), rebuilds the full-text index and removes every older
  version's files, so no byte of the text is left in the table's directory.
* **Bounded growth.** :meth:`maintain` compacts small fragments, folds new rows into the full-text
  index and deletes versions older than ``keepVersionsMinutes``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mdrecall.backends.lancedb.failures import (
    is_conflict,
    is_missing_file,
    is_missing_fts,
    is_missing_table,
    lance_errors,
    short_error,
)
from mdrecall.backends.lancedb.records import COLUMNS, META_IDENTITY, Row, quote, schema_for, unit_rows
from mdrecall.backends.lancedb.results import is_memory_id
from mdrecall.embeddings.base import provider_key
from mdrecall.errors import StoreError

log = logging.getLogger("mdrecall.lancedb")

EmbedFn = Callable[[Sequence[str]], list[list[float]]]


class LanceStore:
    """One LanceDB database (a folder or an object-store prefix) and the active memories table."""

    def __init__(self, uri: str, *, storage_options: dict[str, str] | None = None, prefix: str = "memories",
                 retries: int = 10) -> None:
        self.uri = uri
        self.prefix = prefix
        self.retries = retries
        self.local = "://" not in uri or uri.startswith("file://")
        self.storage_options = dict(storage_options or {})
        if self.local:
            Path(uri.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
        self._db: Any = None
        self.table: Any = None
        self.name: str | None = None
        self.dims: int | None = None
        self.migration: dict[str, Any] | None = None
        self._mutex = threading.RLock()
        self.commits = 0
        self.conflicts_retried = 0

    @property
    def db(self) -> Any:
        """The connection, made on first use: on an object store connecting already reads it, and a
        store that is down then fails this call (a StoreError), not the manager's construction, so a
        long-lived process recovers by itself when it is back."""
        with self._mutex:
            if self._db is None:
                import lancedb

                try:
                    # read_consistency_interval=0: every read sees the latest commit of any process.
                    self._db = lancedb.connect(self.uri, storage_options=self.storage_options or None,
                                               read_consistency_interval=timedelta(0))  # fmt: skip
                except Exception as exc:
                    raise StoreError(f"LanceDB connecting failed ({self.uri}): {short_error(exc)}") from exc
            return self._db

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
                    raise StoreError(f"LanceDB {what} failed ({self.uri}): {short_error(exc)}") from exc
                if stale and self.table is not None:
                    with contextlib.suppress(Exception):
                        self.table.checkout_latest()
                self.conflicts_retried += 1
                log.info("%s: commit conflict (attempt %d), retrying: %s", what, attempt + 1, exc)
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")

    def read(self, action: Callable[[], Any], attempts: int = 4) -> Any:
        """Run a read; when another process's clean-up removed a version's files under it (between
        listing versions and reading one, say), read the latest again, a few times: with several
        writers maintaining the table, one retry can meet the next clean-up."""
        for attempt in range(attempts):
            try:
                return action()
            except Exception as exc:
                if not is_missing_file(exc) or attempt == attempts - 1:
                    raise
                with contextlib.suppress(Exception):
                    self.table.checkout_latest()
                time.sleep(0.02 * (attempt + 1))
        raise AssertionError("unreachable")

    # -- tables ------------------------------------------------------------------------------------

    def _listed(self) -> list[str]:
        response = self.db.list_tables(limit=None)
        names: list[str] = [str(n) for n in getattr(response, "tables", response)]
        return sorted(n for n in names if n.startswith(self.prefix + "_"))

    def _try_open(self, name: str) -> Any:
        """The table, or None when its folder holds no manifest (nothing was ever committed there)."""
        try:
            return self.db.open_table(name)
        except Exception as exc:
            if is_missing_table(exc):
                return None
            raise

    def _tables(self) -> dict[str, Any]:
        """This store's tables by name, opened; listed folders without a manifest left out."""
        opened = {name: self._try_open(name) for name in self._listed()}
        return {name: table for name, table in opened.items() if table is not None}

    @lance_errors("listing tables")
    def table_names(self) -> list[str]:
        return sorted(self._tables())

    @lance_errors("opening the table")
    def open_named(self, name: str) -> None:
        self.table, self.name = self.db.open_table(name), name

    @lance_errors("opening the table")
    def open_any(self) -> None:
        """Open some model's table, for reads that need no vectors (keyword search, listing)."""
        tables = self._tables()
        if tables:
            name = min(tables)
            self.table, self.name = tables[name], name

    def table_name_for(self, identity: dict[str, Any], dims: int) -> str:
        return f"{self.prefix}_{provider_key({**identity, 'dims': dims})[:12]}"

    @lance_errors("opening the table")
    def open(self, identity: dict[str, Any], dims: int, embed: EmbedFn | None) -> None:
        """Open (or create) the table for this model; rows of other models' tables are re-embedded into it.

        A folder of this table with no manifest (a first commit cut between its transaction file
        and its manifest) is no table: it is created afresh, as if the folder were not there (it
        held no rows: a created table's first version is empty, a migration's source tables are
        only dropped once their rows are committed here)."""
        name = self.table_name_for(identity, dims)
        schema = schema_for(dims, identity)
        with self.write_lock():
            tables = self._tables()
            foreign = [n for n in tables if n != name]
            if name in tables:
                self.table = tables[name]
            elif not foreign:
                self.table = self._create(name, schema)
            self.name, self.dims = name, dims
            if foreign:
                if embed is None:
                    raise StoreError("the memories were embedded with another model; an embedding provider is needed to migrate them")
                self._absorb(name, schema, foreign, embed)

    def _create(self, name: str, schema: pa.Schema) -> Any:
        """The new, empty table ``name``; another process's, when it created it at the same moment."""
        try:
            return self.db.create_table(name, schema=schema, exist_ok=True)
        except Exception as exc:
            table = self._try_open(name)  # created by another process between our look and our commit
            if table is None:
                raise StoreError(f"LanceDB creating table {name} failed ({self.uri}): {short_error(exc)}") from exc
            return table

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

    @lance_errors("add")
    def add(self, records: Sequence[dict[str, Any]]) -> None:
        """Insert rows whose ids are not stored yet, in one commit. Idempotent: if the commit's answer
        is lost (a cut connection, a timeout) and LanceDB retries it, the retry, joined against the
        table again, finds the rows there; a plain append would have stored them a second time."""
        if not records:
            return
        data = pa.Table.from_pylist(list(records), schema=self.table.schema)
        self.commit("add", lambda: self.table.merge_insert("id").when_not_matched_insert_all().execute(data))

    @lance_errors("forget")
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

    @lance_errors("maintenance")
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
        # the same moment both succeed. Keep the oldest copy. Rows are deleted by row, not by id: a
        # row stored twice under one id (an append retried after its answer was lost, before adds
        # were idempotent) keeps one copy, where a delete by id would remove both.
        data = (self.table.search().with_row_id(True).select(["id", "textHash", "agentId", "createdAt", "_rowid"])
                .limit(None).to_arrow().to_pylist())  # fmt: skip
        first: set[tuple[str, str]] = set()
        extra: list[tuple[int, str]] = []
        for rec in sorted(data, key=lambda r: (r["createdAt"] or 0, r["id"], r["_rowid"])):
            key = (rec["agentId"] or "", rec["textHash"] or "")
            if key in first:
                extra.append((int(rec["_rowid"]), str(rec["id"])))
            else:
                first.add(key)
        if extra:
            # The id guards the row address: if a compaction moved the rows before this commit, a
            # retried delete matches nothing rather than another memory.
            clause = " OR ".join(f"(_rowid = {row} AND id = {quote(memory_id)})" for row, memory_id in extra)
            self.commit("dedupe", lambda: self.table.delete(clause))
        return len(extra)

    # -- reads -------------------------------------------------------------------------------------

    def _records(self, query: Any) -> list[dict[str, Any]]:
        return self.read(lambda: query.to_list())

    @lance_errors("search")
    def nearest(self, vector: np.ndarray, agent_id: str, limit: int, where: str | None = None) -> list[Row]:
        if self.table is None:
            return []
        clause = f"agentId = {quote(agent_id)}" + (f" AND ({where})" if where else "")
        q = (self.table.search(vector.astype(np.float32), vector_column_name="vector").distance_type("cosine")
             .where(clause, prefilter=True).select([*COLUMNS, "_distance"]).limit(limit))
        return [Row.from_record(r) for r in self._records(q)]

    @lance_errors("keyword search")
    def keyword(self, query: str, agent_id: str, limit: int) -> list[tuple[Row, float]]:
        if self.table is None or not query.strip():
            return []
        try:
            q = (self.table.search(query, query_type="fts").where(f"agentId = {quote(agent_id)}", prefilter=True)
                 .select([*COLUMNS, "_score"]).limit(limit))
            return [(Row.from_record(r), float(r.get("_score") or 0.0)) for r in self._records(q)]
        except Exception as exc:
            if not is_missing_fts(exc):
                raise  # an unreachable store is an error, not "no match"
            log.debug("lancedb keyword search unavailable: %s", exc)
            return []

    @lance_errors("duplicate check")
    def by_hash(self, digest: str, agent_id: str) -> Row | None:
        q = self.table.search().where(f"textHash = {quote(digest)} AND agentId = {quote(agent_id)}").select(list(COLUMNS)).limit(1)
        rows = self._records(q)
        return Row.from_record(rows[0]) if rows else None

    @lance_errors("read")
    def get(self, memory_id: str, agent_id: str | None = None) -> Row | None:
        if self.table is None or not is_memory_id(memory_id):
            return None
        clause = f"id = {quote(memory_id)}" + (f" AND agentId = {quote(agent_id)}" if agent_id else "")
        rows = self._records(self.table.search().where(clause).select(list(COLUMNS)).limit(1))
        return Row.from_record(rows[0]) if rows else None

    @lance_errors("list")
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

    @lance_errors("count")
    def count(self, agent_id: str | None = None) -> int:
        if self.table is None:
            return 0
        return int(self.read(lambda: self.table.count_rows(f"agentId = {quote(agent_id)}" if agent_id else None)))

    @lance_errors("listing versions")
    def version_count(self) -> int:
        return len(self.read(lambda: self.table.list_versions())) if self.table is not None else 0

    @lance_errors("stats")
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
