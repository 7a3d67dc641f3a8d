"""The Postgres store: one agent's view of the team store, an :class:`~mdrecall.store.protocol.IndexStore`.

:class:`mdrecall.index.indexer.Indexer` drives it exactly as it drives the builtin's SQLite index
(files, skipped, record_skipped, touch_file, replace_file, remove_file, the embedding cache), so
incremental sync by content hash is the builtin's code. Every method acts as the connection's role:
row-level security (schema.py) limits it to this agent's rows (and the team's shared ones for reads);
the explicit ``agent_id`` filters below only keep an agent's sync from looking at rows it may read but
does not own.

Connections and atomicity:

* Each file's rows are replaced in one transaction, so readers see a file's old rows or its new ones.
* A sync holds this agent's session-level advisory lock (:meth:`PgStore.agent_lock`): two processes
  of one agent never interleave their syncs, while different agents write at once. Every write of an
  agent's rows happens under that lock.
* While the lock is held, the thread's store calls go through the lock's connection, so a sync can
  wrap a whole rebuild in one transaction (:meth:`PgStore.transaction`): other connections see the
  old rows until it commits (each file's replacement is then a savepoint inside it).
* The embedding cache is the team's: it is always written on a connection of its own and committed
  at once (another agent inserting the same key must never wait on a rebuild, and a finished
  embedding is kept even if the sync fails later). Inserts take keys in sorted order, so concurrent
  writers cannot deadlock.

Faults (docs/reliability.md, "Postgres under faults"): connections come from connections.py, which
checks each one as it leaves the pool and turns every failure of the server into one clear
:class:`~mdrecall.backends.postgres.faults.PgFault`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import PoolTimeout

from mdrecall.backends.postgres.connections import Connection, PgConnections
from mdrecall.backends.postgres.faults import read_only
from mdrecall.backends.postgres.schema import SCHEMA, add_agent, check_version, migrate, role_name_for
from mdrecall.backends.postgres.settings import PostgresSettings
from mdrecall.backends.postgres.visibility import Visibility, classify
from mdrecall.errors import StoreError
from mdrecall.sources.workspace import MemoryFile
from mdrecall.store.db import META_KEY, ChunkRow, FileRow, SkipRecord

S = SCHEMA
#: meta.agent_id of the team's own keys.
TEAM_KEYS = ""
TEAM_IDENTITY_KEY = "embedding_identity"

T = TypeVar("T")


@dataclass
class Capabilities:
    """The store's search capabilities, as the builtin's ``IndexDB.caps`` reports its own."""

    fts_available: bool = True
    fts_error: str | None = None
    vector_available: bool = True
    vector_error: str | None = None
    vec_version: str | None = None


@dataclass(frozen=True)
class Identity:
    role: str
    agent_id: str
    team_id: str


def _int64(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big", signed=True)


def _blob_to_array(blob: bytes) -> np.ndarray[Any, np.dtype[np.float32]]:
    return np.frombuffer(blob, dtype=np.float32)


def _array_to_blob(value: Any) -> bytes:
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32).tobytes()


def scalar(conn: Connection, query: Any, args: Sequence[Any] = ()) -> Any:
    """The first column of the one row ``query`` returns."""
    row = conn.execute(query, args).fetchone()
    if row is None:
        raise StoreError(f"the Postgres store returned no row for {query!r}")
    return row[0]


@dataclass(frozen=True)
class _Staged:
    visibility: Visibility
    #: The text as indexed, kept for team files only (what other agents' memory_get serves).
    content: str | None


class PgStore:
    """One agent's view of the team store, over a connection pool. Thread-safe."""

    #: Each file commits on its own (store/protocol.py): a commit here costs a round trip, not a
    #: keyword-index segment, and a file blocked on another session's lock, a statement timeout or a
    #: restart then keeps every file written before it, visible to the team at once.
    write_batch_files = 1

    def __init__(self, settings: PostgresSettings, *, agent_id: str | None = None, team_id: str | None = None,
                 application_name: str = "mdrecall") -> None:
        self.settings = settings
        self.caps = Capabilities()
        self._staged: dict[str, _Staged] = {}
        self._staged_lock = threading.Lock()
        self._set_role: str | None = None
        wanted_agent = agent_id or settings.agentId
        wanted_team = team_id or settings.teamId
        self.conns = PgConnections(settings, application_name, self._configure)
        try:
            if settings.provision:
                self._set_role = self._provision(wanted_agent, wanted_team)
            # One direct connection first: a server that refuses is reported at once, with libpq's
            # reason, instead of after the pool's whole wait. It also checks the schema and identity.
            with self.conns.connect() as conn:
                self._configure(conn)
                self.schema_version = check_version(conn)
                row = conn.execute(f"SELECT current_user, {S}.current_agent(), {S}.current_team()").fetchone()
                self.caps.vec_version = scalar(conn, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            self.conns.open(name=f"mdrecall-{wanted_agent or 'agent'}")
        except StoreError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise self.conns.fault(exc) or StoreError(
                f"cannot connect to the Postgres store at {self.conns.where}: {type(exc).__name__}: {exc}") from exc
        role, agent, team = row if row is not None else (None, None, None)
        if agent is None:
            self.conns.close()
            raise StoreError(
                f"Postgres role {role!r} is not registered as an mdrecall agent: run "
                "`mdrecall postgres add-agent AGENT --team TEAM` with the store owner's DSN"
            )
        for label, want, got in (("agentId", wanted_agent, agent), ("teamId", wanted_team, team)):
            if want is not None and want != got:
                self.conns.close()
                raise StoreError(f"postgres.{label} is {want!r} but role {role!r} belongs to {got!r}")
        self.identity = Identity(str(role), str(agent), str(team))

    # -- connections -----------------------------------------------------------------------------
    @property
    def where(self) -> str | None:
        """The store's DSN without its password (what fault messages name)."""
        return self.conns.where

    def _provision(self, agent_id: str | None, team_id: str | None) -> str:
        """Owner DSN (development): migrate, register the agent, act as its role from now on."""
        if not agent_id or not team_id:
            raise StoreError("postgres.provision needs postgres.agentId and postgres.teamId")
        with self.conns.connect() as conn:
            migrate(conn)
            login = str(scalar(conn, "SELECT current_user"))
            return add_agent(conn, agent_id, team_id, role=role_name_for(agent_id, team_id), login=False, grant_to=login)

    def _configure(self, conn: Connection) -> None:
        from pgvector.psycopg import register_vector

        if self._set_role:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(self._set_role)))
        hnsw = self.settings.hnsw
        conn.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(self.settings.statementTimeoutMs)))
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(hnsw.efSearch)))
        conn.execute(sql.SQL("SET hnsw.iterative_scan = {}").format(sql.Literal(hnsw.iterativeScan)))
        conn.execute(sql.SQL("SET hnsw.max_scan_tuples = {}").format(sql.Literal(hnsw.maxScanTuples)))
        try:
            register_vector(conn)
        except psycopg.ProgrammingError:
            pass  # no vector type yet (schema not migrated): check_version reports it next

    def _pooled(self) -> AbstractContextManager[Connection]:
        """A checked pooled connection, never the thread's pinned one (the team's embedding cache)."""
        return self.conns.pooled()

    def connection(self) -> AbstractContextManager[Connection]:
        """This thread's pinned connection (inside :meth:`agent_lock` or :meth:`transaction`), else
        one from the pool; a context manager."""
        return self.conns.connection()

    def read(self, work: Callable[[Connection], T]) -> T:
        """``work(conn)`` for a read-only step, once more on a fresh connection if its own died under it."""
        return self.conns.read(work)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """This thread's writes in the block commit together (a savepoint when nested). The team's
        embedding cache is not part of it (the module docstring says why)."""
        with self.conns.pinned() as conn, conn.transaction():
            yield

    def close(self) -> None:
        self.conns.close()

    def agent_lock(self, timeout: float | None) -> AbstractContextManager[bool]:
        """Hold this agent's sync lock (a session-level advisory lock) for the block, a context manager
        giving False when it could not be had within ``timeout`` seconds. The thread's store calls
        use its connection meanwhile."""
        key = _int64(f"mdrecall-sync\x00{self.identity.team_id}\x00{self.identity.agent_id}")
        return self.conns.advisory_lock(key, timeout)

    def check_writable(self) -> None:
        """A read-only store (a standby, ``default_transaction_read_only``) as its PgFault, at once."""
        with self.connection() as conn:
            if scalar(conn, "SELECT current_setting('transaction_read_only')") == "on":
                raise read_only(self.where)

    # -- meta ------------------------------------------------------------------------------------
    def get_kv(self, key: str, *, team: bool = False) -> str | None:
        with self.connection() as conn:
            row = conn.execute(
                f"SELECT value FROM {S}.meta WHERE team_id = {S}.current_team() AND agent_id = %s AND key = %s",
                (TEAM_KEYS if team else self.identity.agent_id, key),
            ).fetchone()
        return str(row[0]) if row else None

    def set_kv(self, key: str, value: str, *, team: bool = False) -> None:
        with self.connection() as conn:
            conn.execute(
                f"INSERT INTO {S}.meta(agent_id, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (team_id, agent_id, key) DO UPDATE SET value = excluded.value",
                (TEAM_KEYS if team else self.identity.agent_id, key, value),
            )

    def claim_team_kv(self, key: str, value: str) -> str:
        """Set a team key unless it is set; returns the value in force (first writer wins)."""
        with self.connection() as conn:
            conn.execute(
                f"INSERT INTO {S}.meta(agent_id, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (team_id, agent_id, key) DO NOTHING",
                (TEAM_KEYS, key, value),
            )
            return str(scalar(
                conn,
                f"SELECT value FROM {S}.meta WHERE team_id = {S}.current_team() AND agent_id = %s AND key = %s",
                (TEAM_KEYS, key),
            ))

    def read_meta(self) -> dict[str, Any] | None:
        raw = self.get_kv(META_KEY)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.set_kv(META_KEY, json.dumps(meta, sort_keys=True))

    # -- vectors ---------------------------------------------------------------------------------
    def ensure_vec_table(self, dims: int) -> None:
        """The HNSW index for vectors of ``dims`` (created by an owner-run function, once per size)."""
        hnsw = self.settings.hnsw
        with self.connection() as conn:
            conn.execute(f"SELECT {S}.ensure_vector_index(%s, %s, %s)", (dims, hnsw.m, hnsw.efConstruction))

    def vector_index_sizes(self) -> list[int]:
        with self.connection() as conn:
            rows = conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND indexname LIKE 'chunks_hnsw_%%'", (S,)
            ).fetchall()
        return sorted(int(str(r[0]).rsplit("_", 1)[1]) for r in rows)

    # -- files -----------------------------------------------------------------------------------
    _OWN = f"team_id = {S}.current_team() AND agent_id = {S}.current_agent()"

    def files(self, source: str | None = None) -> dict[str, FileRow]:
        query = f"SELECT path, source, hash, mtime, size FROM {S}.files WHERE {self._OWN}"
        args: tuple[Any, ...] = ()
        if source is not None:
            query += " AND source = %s"
            args = (source,)
        with self.connection() as conn:
            return {r[0]: FileRow(*r) for r in conn.execute(query, args)}

    def skipped(self) -> dict[str, SkipRecord]:
        with self.connection() as conn:
            rows = conn.execute(f"SELECT path, source, reason, mtime, size FROM {S}.skipped_files WHERE {self._OWN}")
            return {r[0]: SkipRecord(r[1], r[2], r[3], r[4]) for r in rows}

    def stage(self, file: MemoryFile, text: str) -> None:
        """The text a pending ``replace_file`` of ``file`` was chunked from (the indexer's ``on_text``):
        it decides the file's visibility, and a team file's copy is kept for other agents' reads."""
        visibility = classify(file.rel_path, file.source, text, self.settings.sharedFolders)
        with self._staged_lock:
            self._staged[file.rel_path] = _Staged(visibility, text if visibility == "team" else None)

    def _delete_file_rows(self, conn: Connection, path: str) -> None:
        for table in ("chunks", "files", "skipped_files"):
            conn.execute(f"DELETE FROM {S}.{table} WHERE {self._OWN} AND path = %s", (path,))

    def record_skipped(self, path: str, source: str, reason: str, mtime: int, size: int) -> None:
        with self.connection() as conn, conn.transaction():
            self._delete_file_rows(conn, path)
            conn.execute(
                f"INSERT INTO {S}.skipped_files(path, source, reason, mtime, size) VALUES (%s, %s, %s, %s, %s)",
                (path, source, reason, mtime, size),
            )

    def touch_file(self, path: str, mtime: int, size: int) -> None:
        with self.connection() as conn:
            conn.execute(f"UPDATE {S}.files SET mtime = %s, size = %s WHERE {self._OWN} AND path = %s", (mtime, size, path))

    def remove_file(self, path: str) -> None:
        with self.connection() as conn, conn.transaction():
            self._delete_file_rows(conn, path)

    def replace_file(self, file: FileRow, chunks: Sequence[ChunkRow], model: str) -> None:
        """Atomically replace everything stored for one file. The text staged for it decides its
        visibility (none staged: private, the narrower choice)."""
        with self._staged_lock:
            staged = self._staged.pop(file.path, None) or _Staged("private", None)
        now = int(time.time())
        cfg = self.settings.textSearchConfig
        rows = [
            (c.id, c.path, c.source, c.start_line, c.end_line, c.hash, model, c.text,
             _blob_to_array(c.embedding) if c.embedding is not None else None, c.embed_hash or c.hash,
             c.fts_text, staged.visibility, now)
            for c in chunks
        ]
        with self.connection() as conn, conn.transaction():
            self._delete_file_rows(conn, file.path)
            conn.execute(
                f"INSERT INTO {S}.files(path, source, hash, mtime, size, indexed_at, visibility, content) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (file.path, file.source, file.hash, file.mtime, file.size, now, staged.visibility, staged.content),
            )
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {S}.chunks(chunk_id, path, source, start_line, end_line, hash, model, text, "
                        "embedding, embed_hash, fts, visibility, updated_at) VALUES "
                        f"(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('{cfg}', %s), %s, %s) "
                        "ON CONFLICT (team_id, agent_id, chunk_id) DO NOTHING",  # repeated text in one file: keep one
                        rows,
                    )

    # -- counts ----------------------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        """This agent's own files and chunks per source (what its workspace put in the store)."""
        out: dict[str, dict[str, int]] = {}
        with self.connection() as conn:
            for source, n in conn.execute(f"SELECT source, count(*) FROM {S}.files WHERE {self._OWN} GROUP BY source"):
                out.setdefault(source, {"files": 0, "chunks": 0})["files"] = n
            for source, n in conn.execute(f"SELECT source, count(*) FROM {S}.chunks WHERE {self._OWN} GROUP BY source"):
                out.setdefault(source, {"files": 0, "chunks": 0})["chunks"] = n
        return out

    def visible_counts(self) -> dict[str, int]:
        """Everything this agent can read (own rows plus the team's shared ones), as the database sees it."""
        with self.connection() as conn:
            files = conn.execute(
                f"SELECT count(*) FILTER (WHERE agent_id = {S}.current_agent()), "
                f"count(*) FILTER (WHERE agent_id <> {S}.current_agent()) FROM {S}.files"
            ).fetchone()
            chunks = conn.execute(
                f"SELECT count(*) FILTER (WHERE agent_id = {S}.current_agent()), "
                f"count(*) FILTER (WHERE agent_id <> {S}.current_agent()) FROM {S}.chunks"
            ).fetchone()
            shared = scalar(conn, f"SELECT count(*) FROM {S}.files WHERE {self._OWN} AND visibility = 'team'")
        assert files is not None and chunks is not None  # aggregates always return a row
        return {"ownFiles": files[0], "ownChunks": chunks[0], "ownSharedFiles": shared,
                "teamFiles": files[1], "teamChunks": chunks[1]}

    def shared_file(self, agent_id: str, path: str) -> str | None:
        """The stored text of another agent's team file (None when absent or not visible)."""
        with self.connection() as conn:
            row = conn.execute(
                f"SELECT content FROM {S}.files WHERE team_id = {S}.current_team() AND agent_id = %s AND path = %s "
                "AND visibility = 'team'",
                (agent_id, path),
            ).fetchone()
        return str(row[0]) if row and row[0] is not None else None

    # -- embedding cache (shared by the team; never on the pinned connection) ---------------------
    def cache_get(self, provider: str, model: str, key: str, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = sorted(set(hashes))
        found: dict[str, bytes] = {}
        with self._pooled() as conn:
            for start in range(0, len(wanted), 1000):
                rows = conn.execute(
                    f"SELECT hash, embedding FROM {S}.embedding_cache WHERE team_id = {S}.current_team() "
                    "AND provider = %s AND model = %s AND provider_key = %s AND hash = ANY(%s)",
                    (provider, model, key, wanted[start : start + 1000]),
                ).fetchall()
                found.update((h, _array_to_blob(e)) for h, e in rows)
        return found

    def cache_touch(self, provider: str, model: str, key: str, hashes: Sequence[str]) -> None:
        if not hashes:
            return
        # Recency is advisory: rows another writer holds are skipped rather than waited for.
        with self._pooled() as conn:
            conn.execute(
                f"UPDATE {S}.embedding_cache SET updated_at = %s WHERE (team_id, provider, model, provider_key, hash) IN "
                f"(SELECT team_id, provider, model, provider_key, hash FROM {S}.embedding_cache "
                f"WHERE team_id = {S}.current_team() AND provider = %s AND model = %s AND provider_key = %s "
                "AND hash = ANY(%s) FOR UPDATE SKIP LOCKED)",
                (time.time_ns(), provider, model, key, sorted(set(hashes))),
            )

    def cache_put(self, provider: str, model: str, key: str, items: Sequence[tuple[str, bytes]]) -> None:
        if not items:
            return
        now = time.time_ns()
        rows = sorted({h: blob for h, blob in items}.items())  # one key order for every writer: no deadlocks
        with self._pooled() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {S}.embedding_cache(provider, model, provider_key, hash, embedding, dims, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(provider, model, key, h, _blob_to_array(blob), len(blob) // 4, now) for h, blob in rows],
            )

    def cache_prune(self, max_entries: int | None) -> int:
        # The cache is the team's: its cap is postgres.cacheMaxEntries, not one workspace's cache.maxEntries.
        cap = self.settings.cacheMaxEntries
        if cap is None:
            return 0
        with self._pooled() as conn:
            count = int(scalar(conn, f"SELECT count(*) FROM {S}.embedding_cache WHERE team_id = {S}.current_team()"))
            if count <= cap:
                return 0
            cur = conn.execute(
                f"DELETE FROM {S}.embedding_cache WHERE ctid IN (SELECT ctid FROM {S}.embedding_cache "
                f"WHERE team_id = {S}.current_team() ORDER BY updated_at LIMIT %s FOR UPDATE SKIP LOCKED)",
                (count - cap,),
            )
            return cur.rowcount

    def cache_size(self) -> int:
        with self._pooled() as conn:
            return int(scalar(conn, f"SELECT count(*) FROM {S}.embedding_cache WHERE team_id = {S}.current_team()"))

    # -- health ----------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        with self.connection() as conn:
            server = scalar(conn, "SHOW server_version")
            level = scalar(conn, f"SELECT coalesce(max(version), 0) FROM {S}.schema_migrations")
        return {
            "serverVersion": server,
            "pgvectorVersion": self.caps.vec_version,
            "schemaVersion": level,
            "role": self.identity.role,
            "agentId": self.identity.agent_id,
            "teamId": self.identity.team_id,
            "vectorIndexes": self.vector_index_sizes(),
            "pool": self.conns.stats(),
        }


__all__ = ["TEAM_IDENTITY_KEY", "Capabilities", "Identity", "PgStore", "scalar"]
