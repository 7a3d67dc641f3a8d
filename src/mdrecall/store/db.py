"""The SQLite index: connection setup, schema, and the reads and writes the engine needs.

apsw is used because Python's stdlib ``sqlite3`` is often built without extension loading, and
sqlite-vec is an extension. When the extension cannot load, vectors still live in ``chunks.embedding``
(float32 blobs) and are searched in process.

Why this module is long: it is the only code that speaks SQL to the index; every table's reads and
writes live here so the schema has one owner.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import apsw
import numpy as np

from mdrecall.errors import StoreError

SCHEMA_VERSION = 2
META_KEY = "memory_index_meta_v1"
#: A random token replaced by every write that changes the stored chunks: in-process caches (the
#: vector matrix) compare it instead of reloading. Random, not a counter, so a rebuilt database
#: swapped in under the same path can never repeat the token the cache saw.
CHUNKS_VERSION_KEY = "chunks_version"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
  path TEXT PRIMARY KEY,
  source TEXT NOT NULL DEFAULT 'memory',
  hash TEXT NOT NULL,
  mtime INTEGER NOT NULL,
  size INTEGER NOT NULL,
  indexed_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
  rowid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT 'memory',
  start_line INTEGER NOT NULL,
  end_line INTEGER NOT NULL,
  hash TEXT NOT NULL,
  model TEXT NOT NULL,
  text TEXT NOT NULL,
  embedding BLOB,
  embed_hash TEXT,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS idx_chunks_source ON chunks(source);
CREATE TABLE IF NOT EXISTS skipped_files (
  path TEXT PRIMARY KEY,
  source TEXT NOT NULL,
  reason TEXT NOT NULL,
  mtime INTEGER NOT NULL,
  size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS embedding_cache (
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  provider_key TEXT NOT NULL,
  hash TEXT NOT NULL,
  embedding BLOB NOT NULL,
  dims INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (provider, model, provider_key, hash)
);
CREATE INDEX IF NOT EXISTS idx_embedding_cache_updated_at ON embedding_cache(updated_at);
"""

_SCHEMA_TABLES = ("meta", "files", "chunks", "skipped_files", "embedding_cache", "idx_chunks_path",
                  "idx_chunks_source", "idx_embedding_cache_updated_at")

FTS_TOKENIZERS = {
    # Porter stemming so "meetings" finds "meeting"; diacritics folded. CJK is pre-split (see text.py).
    "unicode61": "porter unicode61 remove_diacritics 2",
    "trigram": "trigram case_sensitive 0",
}


def vector_to_blob(vector: Sequence[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def blob_to_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)


@dataclass
class Capabilities:
    fts_available: bool = False
    fts_error: str | None = None
    vector_available: bool = False
    vector_error: str | None = None
    vec_version: str | None = None


@dataclass
class ChunkRow:
    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    hash: str
    text: str
    embedding: bytes | None
    fts_text: str
    #: Hash of exactly what was embedded (heading trail + text); the embedding-cache key.
    embed_hash: str | None = None


@dataclass
class FileRow:
    path: str
    source: str
    hash: str
    mtime: int
    size: int


class SkipRecord(NamedTuple):
    """A file the index holds no chunks for, and why (too large, binary, unreadable)."""

    source: str
    reason: str
    mtime: int
    size: int


@dataclass
class StoreOptions:
    fts_enabled: bool = True
    fts_tokenizer: str = "unicode61"
    vector_enabled: bool = True
    vector_extension_path: str | None = None
    busy_timeout_ms: int = 10_000
    readonly: bool = False
    #: Test hook: called with the raw apsw connection before the schema is created.
    connection_hook: Callable[[apsw.Connection], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _load_sqlite_vec(conn: apsw.Connection, extension_path: str | None) -> str:
    conn.enable_load_extension(True)
    try:
        if extension_path:
            conn.load_extension(extension_path)
        else:
            import sqlite_vec

            conn.load_extension(sqlite_vec.loadable_path())
    finally:
        conn.enable_load_extension(False)
    return str(conn.execute("SELECT vec_version()").fetchone()[0])


class IndexDB:
    """One connection to an index database. Not shared between threads (open one per thread)."""

    def __init__(self, path: Path, options: StoreOptions) -> None:
        self.path = path
        self.options = options
        self.caps = Capabilities()
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = apsw.Connection(str(path), flags=flags)
        except (apsw.Error, OSError) as exc:
            raise StoreError(f"cannot open index database {path}: {exc}") from exc
        self.conn.setbusytimeout(options.busy_timeout_ms)
        if options.connection_hook is not None:
            options.connection_hook(self.conn)
        self._setup()

    # -- setup -----------------------------------------------------------------------------------
    def _setup(self) -> None:
        conn = self.conn
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"cannot switch {self.path} to WAL mode (got {mode})")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=OFF")
            # Schema changes take the write lock up front (BEGIN IMMEDIATE waits on the busy timeout):
            # a deferred transaction that reads the schema first and then upgrades to a write fails at
            # once with "database is locked" when another process created the schema meanwhile.
            if not self._has_tables(_SCHEMA_TABLES):
                self._immediate(lambda: conn.execute(_SCHEMA))
            if not self._has_embed_hash():  # an index written by schema 1
                self._immediate(
                    lambda: self._has_embed_hash() or conn.execute("ALTER TABLE chunks ADD COLUMN embed_hash TEXT")
                )
        except apsw.Error as exc:
            raise StoreError(f"cannot initialise index database {self.path}: {exc}") from exc
        if self.options.fts_enabled:
            tokenizer = FTS_TOKENIZERS[self.options.fts_tokenizer]
            try:
                create = f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, tokenize='{tokenizer}')"
                if not self._has_tables(("chunks_fts",)):
                    self._immediate(lambda: conn.execute(create))
                else:
                    conn.execute(create)  # a no-op read that still fails where fts5 is unavailable
                self.caps.fts_available = True
            except apsw.Error as exc:
                self.caps.fts_error = f"FTS5 unavailable: {exc}"
        else:
            self.caps.fts_error = "disabled by configuration (query.fts.enabled: false)"
        if self.options.vector_enabled:
            try:
                self.caps.vec_version = _load_sqlite_vec(conn, self.options.vector_extension_path)
                self.caps.vector_available = True
            except Exception as exc:  # apsw.Error, ImportError, OSError all mean "not available"
                self.caps.vector_error = f"sqlite-vec unavailable: {exc}"
        else:
            self.caps.vector_error = "disabled by configuration (store.vector.enabled: false)"

    def _has_tables(self, names: Iterable[str]) -> bool:
        present = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master")}
        return all(name in present for name in names)

    def _has_embed_hash(self) -> bool:
        return any(row[1] == "embed_hash" for row in self.conn.execute("PRAGMA table_info(chunks)"))

    def _immediate(self, work: Callable[[], object]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            work()
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        try:
            self.conn.close()
        except apsw.Error:
            pass

    def probe_ok(self) -> bool:
        """A cheap structural probe: the first and last row of every stored table (milliseconds at
        any size). Catches a file that is not a database, a torn header or scrambled pages; damage
        deeper in a table surfaces as ``CorruptError`` when it is read (the manager recovers then)
        and to the full ``integrity_ok`` check, which the manager runs in the background."""
        damaged = (apsw.CorruptError, apsw.NotADBError, apsw.IOError)
        try:
            tables = self.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        except apsw.Error:
            return False
        for name, sql in tables:
            sql = (sql or "").upper()
            if name.startswith("sqlite_") or sql.startswith("CREATE VIRTUAL TABLE"):
                continue  # virtual tables are read through their shadow tables, probed here
            quoted = '"' + name.replace('"', '""') + '"'
            # WITHOUT ROWID tables (FTS5's) have no rowid to order by: their first row will do.
            orders = ("",) if "WITHOUT ROWID" in sql else (" ORDER BY rowid", " ORDER BY rowid DESC")
            for order in orders:
                try:
                    self.conn.execute(f"SELECT * FROM {quoted}{order} LIMIT 1").fetchall()
                except damaged:
                    return False
                except apsw.Error:
                    pass  # busy and the like: not a verdict on the file
        return True

    def integrity_ok(self) -> bool:
        try:
            row = self.conn.execute("PRAGMA quick_check").fetchone()
            return bool(row) and row[0] == "ok"
        except apsw.Error:
            return False

    # -- meta ------------------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
        if not row:
            return None
        try:
            value = json.loads(row[0])
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (META_KEY, json.dumps(meta, sort_keys=True)),
        )

    def get_kv(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_kv(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- vector table ----------------------------------------------------------------------------
    def vec_dims(self) -> int | None:
        row = self.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_vec'").fetchone()
        if not row:
            return None
        sql = row[0]
        start = sql.find("float[")
        if start < 0:
            return None
        return int(sql[start + 6 : sql.index("]", start)])

    def ensure_vec_table(self, dims: int) -> None:
        if not self.caps.vector_available:
            return
        current = self.vec_dims()
        if current == dims:
            return
        with self.conn:
            if current is not None:
                self.conn.execute("DROP TABLE chunks_vec")
            self.conn.execute(
                f"CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{dims}] distance_metric=cosine, source text)"
            )
            # Back-fill from stored embeddings (e.g. after the extension became available).
            for rowid, source, blob in self.conn.execute(
                "SELECT rowid, source, embedding FROM chunks WHERE embedding IS NOT NULL"
            ).fetchall():
                if len(blob) == dims * 4:
                    self.conn.execute(
                        "INSERT INTO chunks_vec(rowid, embedding, source) VALUES(?, ?, ?)", (rowid, blob, source)
                    )

    # -- files -----------------------------------------------------------------------------------
    def files(self, source: str | None = None) -> dict[str, FileRow]:
        sql = "SELECT path, source, hash, mtime, size FROM files"
        args: tuple[Any, ...] = ()
        if source is not None:
            sql += " WHERE source = ?"
            args = (source,)
        return {r[0]: FileRow(*r) for r in self.conn.execute(sql, args)}

    def skipped(self) -> dict[str, SkipRecord]:
        return {
            r[0]: SkipRecord(r[1], r[2], r[3], r[4])
            for r in self.conn.execute("SELECT path, source, reason, mtime, size FROM skipped_files")
        }

    def record_skipped(self, path: str, source: str, reason: str, mtime: int, size: int) -> None:
        with self.conn:
            self._delete_file_rows(path)
            self.conn.execute(
                "INSERT INTO skipped_files(path, source, reason, mtime, size) VALUES(?,?,?,?,?) "
                "ON CONFLICT(path) DO UPDATE SET source=excluded.source, reason=excluded.reason, "
                "mtime=excluded.mtime, size=excluded.size",
                (path, source, reason, mtime, size),
            )
            self._bump_chunks_version()

    def touch_file(self, path: str, mtime: int, size: int) -> None:
        self.conn.execute("UPDATE files SET mtime = ?, size = ? WHERE path = ?", (mtime, size, path))

    def _delete_file_rows(self, path: str) -> None:
        conn = self.conn
        if self.caps.vector_available and self.vec_dims() is not None:
            # One point delete per rowid: vec0 answers "rowid IN (subquery)" with a full table scan,
            # which made indexing quadratic in the number of files (benchmarks/speed.py).
            rowids = [(r[0],) for r in conn.execute("SELECT rowid FROM chunks WHERE path = ?", (path,))]
            if rowids:
                conn.executemany("DELETE FROM chunks_vec WHERE rowid = ?", rowids)
        if self.caps.fts_available:
            conn.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE path = ?)", (path,))
        conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
        conn.execute("DELETE FROM files WHERE path = ?", (path,))
        conn.execute("DELETE FROM skipped_files WHERE path = ?", (path,))

    def remove_file(self, path: str) -> None:
        with self.conn:
            self._delete_file_rows(path)
            self._bump_chunks_version()

    def _bump_chunks_version(self) -> None:
        self.set_kv(CHUNKS_VERSION_KEY, uuid.uuid4().hex)

    def chunks_version(self) -> str | None:
        return self.get_kv(CHUNKS_VERSION_KEY)

    def replace_file(self, file: FileRow, chunks: Sequence[ChunkRow], model: str) -> None:
        """Atomically replace everything stored for one file."""
        now = int(time.time())
        conn = self.conn
        has_vec = self.caps.vector_available and self.vec_dims() is not None
        with conn:
            self._delete_file_rows(file.path)
            for chunk in chunks:
                conn.execute(
                    "INSERT INTO chunks(id, path, source, start_line, end_line, hash, model, text, embedding, embed_hash, updated_at) "
                    "VALUES(?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO NOTHING",
                    (
                        chunk.id,
                        chunk.path,
                        chunk.source,
                        chunk.start_line,
                        chunk.end_line,
                        chunk.hash,
                        model,
                        chunk.text,
                        chunk.embedding,
                        chunk.embed_hash or chunk.hash,
                        now,
                    ),
                )
                if conn.changes() == 0:
                    continue  # identical chunk twice in one file (repeated text): keep one
                rowid = conn.last_insert_rowid()
                if self.caps.fts_available:
                    conn.execute("INSERT INTO chunks_fts(rowid, text) VALUES(?, ?)", (rowid, chunk.fts_text))
                if has_vec and chunk.embedding is not None:
                    conn.execute(
                        "INSERT INTO chunks_vec(rowid, embedding, source) VALUES(?, ?, ?)",
                        (rowid, chunk.embedding, chunk.source),
                    )
            conn.execute(
                "INSERT INTO files(path, source, hash, mtime, size, indexed_at) VALUES(?,?,?,?,?,?)",
                (file.path, file.source, file.hash, file.mtime, file.size, now),
            )
            self._bump_chunks_version()

    # -- counts ----------------------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for source, n in self.conn.execute("SELECT source, COUNT(*) FROM files GROUP BY source"):
            out.setdefault(source, {"files": 0, "chunks": 0})["files"] = n
        for source, n in self.conn.execute("SELECT source, COUNT(*) FROM chunks GROUP BY source"):
            out.setdefault(source, {"files": 0, "chunks": 0})["chunks"] = n
        return out

    def has_source(self, source: str) -> bool:
        """Whether any chunk of ``source`` is indexed (one lookup in idx_chunks_source)."""
        return self.conn.execute("SELECT 1 FROM chunks WHERE source = ? LIMIT 1", (source,)).fetchone() is not None

    def chunk_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def data_version(self) -> int:
        """Changes whenever another connection commits (cheap staleness check for caches)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    # -- embedding cache -------------------------------------------------------------------------
    def cache_get(self, provider: str, model: str, key: str, hashes: Iterable[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        batch: list[str] = []
        for h in hashes:
            batch.append(h)
            if len(batch) >= 400:
                found.update(self._cache_get_batch(provider, model, key, batch))
                batch = []
        if batch:
            found.update(self._cache_get_batch(provider, model, key, batch))
        return found

    def _cache_get_batch(self, provider: str, model: str, key: str, hashes: list[str]) -> dict[str, bytes]:
        marks = ",".join("?" * len(hashes))
        rows = self.conn.execute(
            f"SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND model = ? AND provider_key = ? "
            f"AND hash IN ({marks})",
            (provider, model, key, *hashes),
        ).fetchall()
        return {h: e for h, e in rows}

    def cache_touch(self, provider: str, model: str, key: str, hashes: Sequence[str]) -> None:
        now = time.time_ns()
        self.conn.executemany(
            "UPDATE embedding_cache SET updated_at = ? WHERE provider = ? AND model = ? AND provider_key = ? AND hash = ?",
            [(now, provider, model, key, h) for h in hashes],
        )

    def cache_put(self, provider: str, model: str, key: str, items: Sequence[tuple[str, bytes]]) -> None:
        now = time.time_ns()
        self.conn.executemany(
            "INSERT INTO embedding_cache(provider, model, provider_key, hash, embedding, dims, updated_at) "
            "VALUES(?,?,?,?,?,?,?) ON CONFLICT(provider, model, provider_key, hash) DO UPDATE SET "
            "embedding = excluded.embedding, dims = excluded.dims, updated_at = excluded.updated_at",
            [(provider, model, key, h, blob, len(blob) // 4, now) for h, blob in items],
        )

    def cache_prune(self, max_entries: int | None) -> int:
        if max_entries is None:
            return 0
        count = self.cache_size()
        if count <= max_entries:
            return 0
        excess = count - max_entries
        self.conn.execute(
            "DELETE FROM embedding_cache WHERE rowid IN "
            "(SELECT rowid FROM embedding_cache ORDER BY updated_at ASC LIMIT ?)",
            (excess,),
        )
        return excess

    def cache_size(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0])

    # -- transactions ----------------------------------------------------------------------------
    def transaction(self) -> AbstractContextManager[object]:
        return self.conn  # apsw: the connection as a context manager is one transaction
