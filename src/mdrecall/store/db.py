"""The SQLite index: connection setup, schema, and the reads and writes the engine needs.

apsw is used because Python's stdlib ``sqlite3`` is often built without extension loading, and
sqlite-vec is an extension.

Layout (schema 3). Every vector is stored once, in ``embedding_cache``, keyed by its embedding space
(provider, model, provider key) and the hash of exactly what was embedded; a chunk points at its
vector by ``chunks.vector_id``. Vectors no chunk points at are the embedding cache proper (bounded
by ``cache.maxEntries``); vectors in use are never pruned. The keyword index is a contentless FTS5
table (the text lives in ``chunks`` only; deleting by rowid needs ``contentless_delete``, SQLite
3.43+). New databases use 8 KiB pages, which hold five 384-dimension vectors each without overflow
pages (4 KiB pages hold two). Search reads vectors from here into memory (search/vector.py) or
scans them on disk; there is no vec0 table.

Vectors are stored as float16 unit vectors (``vector_encoding`` in ``meta``): half the bytes of
float32, and no ranking change on the dev sets (recall@budget identical to four decimals,
docs/benchmarks.md). Search reads them back into float32. sqlite-vec cannot compute distances on
float16, so its ``vec_distance_cosine`` scans only float32 files (schema 1/2, and schema-3 files
written before the encoding was recorded); NumPy scans the others. Across this module's interface
vectors are always float32 bytes (``vector_to_blob``): ``ChunkRow.embedding``, ``cache_put`` and
``cache_get`` speak float32, whatever a store keeps.

Schema 2 (every vector in ``chunks.embedding``, in a vec0 table and in the cache; FTS5 with its own
copy of the text) is still read until the first sync rebuilds the index from the files, reusing
every stored vector (``seed_cache_from``): the bumped ``schemaVersion`` in the index identity is what
triggers that rebuild.

Why this module is long: it is the only code that speaks SQL to the index; every table's reads and
writes live here so the schema has one owner.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import apsw

from mdrecall.errors import StoreError
from mdrecall.store.sql import rows, scalar

SCHEMA_VERSION = 3
META_KEY = "memory_index_meta_v1"
#: A random token replaced by every write that changes the stored chunks: in-process caches (the
#: vector matrix) compare it instead of reloading. Random, not a counter, so a rebuilt database
#: swapped in under the same path can never repeat the token the cache saw.
CHUNKS_VERSION_KEY = "chunks_version"
#: Vector length the index was prepared for (``ensure_vec_table``).
VECTOR_DIMS_KEY = "vector_dims"
#: How this file stores vectors (``float16`` or ``float32``); absent: float32.
VECTOR_ENCODING_KEY = "vector_encoding"
#: The encoding of vectors in new databases.
VECTOR_ENCODING = "float16"
#: Page size of new databases: an 8 KiB page holds nine rows of 384 float16 dimensions (6 % of it
#: unused); a 4 KiB page holds four (16 % unused).
PAGE_SIZE = 8192
#: Keyword-index compaction after an incremental sync (IndexDB.compact_keyword_index): always up to
#: this many chunks, past it when more than COMPACT_SEGMENTS segments, never past COMPACT_MAX_CHUNKS.
COMPACT_ALWAYS_CHUNKS = 20_000
COMPACT_SEGMENTS = 4
COMPACT_MAX_CHUNKS = 200_000

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
  context TEXT,
  line_numbers TEXT,
  vector_id INTEGER,
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
CREATE TABLE IF NOT EXISTS embedding_spaces (
  id INTEGER PRIMARY KEY,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  provider_key TEXT NOT NULL,
  UNIQUE (provider, model, provider_key)
);
CREATE TABLE IF NOT EXISTS embedding_cache (
  rowid INTEGER PRIMARY KEY,
  space INTEGER NOT NULL,
  hash TEXT NOT NULL,
  embedding BLOB NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (space, hash)
);
CREATE INDEX IF NOT EXISTS idx_embedding_cache_updated_at ON embedding_cache(updated_at);
"""

_SCHEMA_TABLES = ("meta", "files", "chunks", "skipped_files", "embedding_spaces", "embedding_cache", "idx_chunks_path",
                  "idx_chunks_source", "idx_embedding_cache_updated_at")

FTS_TOKENIZERS = {
    # Porter stemming so "meetings" finds "meeting"; diacritics folded. CJK is pre-split (see text.py).
    "unicode61": "porter unicode61 remove_diacritics 2",
    "trigram": "trigram case_sensitive 0",
}


def vector_to_blob(vector: Sequence[float]) -> bytes:
    """A vector as the store interface passes it: float32 bytes in the machine's order."""
    import numpy as np  # not on the keyword-only path (a one-shot search without it starts ~0.1 s sooner)

    return np.asarray(vector, dtype=np.float32).tobytes()


def blob_to_vector(blob: bytes) -> Any:
    import numpy as np

    return np.frombuffer(blob, dtype=np.float32)


def encode_vector(blob: bytes, encoding: str) -> bytes:
    """A float32 blob as ``encoding`` stores it. float16 keeps the unit vector: cosine similarity
    does not depend on the length, and a unit vector's components cannot overflow float16."""
    if encoding == "float32":
        return blob
    import numpy as np

    vector = np.frombuffer(blob, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm else vector).astype(np.float16).tobytes()


def decode_vector(blob: bytes, encoding: str) -> bytes:
    """A stored blob back as float32 bytes."""
    if encoding == "float32":
        return blob
    import numpy as np

    return np.frombuffer(blob, dtype=np.float16).astype(np.float32).tobytes()


def bytes_per_dim(encoding: str) -> int:
    return 2 if encoding == "float16" else 4


class VectorLayout(NamedTuple):
    """Where a file keeps its vectors and in what form (they change when a rebuild is swapped in)."""

    #: Schema 1/2: vectors in ``chunks.embedding``.
    legacy: bool
    #: ``float16`` or ``float32``.
    encoding: str


class VectorRef(NamedTuple):
    """One chunk's vector. ``key`` names the stored vector: equal keys, equal vectors (schema 3: the
    vector's row, which never changes; schema 1/2: the chunk's rowid and embed_hash)."""

    rowid: int
    key: object
    source: str
    path: str


class VectorSpace(NamedTuple):
    """What a vector means: the provider, its model and the provider key (hash of its identity)."""

    provider: str
    model: str
    provider_key: str


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
    #: The embedding space ``embedding`` belongs to (provider, model, provider key); a store that
    #: keys its vectors by it (this one) files them there, others may ignore it.
    space: VectorSpace | None = None
    #: The heading trail indexed with the text (None: none). Kept because the keyword index is
    #: contentless: calibrated scoring re-reads what each chunk was indexed from.
    context: str | None = None
    #: The source line of each line of ``text`` when they are not ``start_line..end_line`` in
    #: order (transcripts), as ``chunking.encode_numbers`` writes it; None: in order.
    line_numbers: str | None = None


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
    #: Page size of a database created by this connection (existing files keep theirs).
    page_size: int = PAGE_SIZE
    busy_timeout_ms: int = 10_000
    #: SQLite's page cache per connection, MiB (0: SQLite's own 2 MiB). See ``CACHE_MIB``.
    cache_mib: int = 64
    readonly: bool = False
    #: Test hook: called with the raw apsw connection before the schema is created.
    connection_hook: Callable[[apsw.Connection], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _bundled_sqlite_vec() -> str:
    """The extension shipped in the sqlite-vec package, found without importing it (its
    ``__init__`` imports numpy, ~0.1 s that a keyword search does not need)."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("sqlite_vec")
    if spec is not None and spec.origin:
        return os.path.join(os.path.dirname(spec.origin), "vec0")
    import sqlite_vec  # a layout we do not know: let the package say

    return str(sqlite_vec.loadable_path())


def _load_sqlite_vec(conn: apsw.Connection, extension_path: str | None) -> str:
    conn.enable_load_extension(True)
    try:
        conn.load_extension(extension_path or _bundled_sqlite_vec())
    finally:
        conn.enable_load_extension(False)
    return str(scalar(conn, "SELECT vec_version()"))


class IndexDB:
    """One connection to an index database. Not shared between threads (open one per thread)."""

    #: Files a sync commits together (store/protocol.py). Each commit writes every page it changed to
    #: the write-ahead log, and the pages every file changes (the tables' upper B-tree pages, the
    #: keyword index's structure record, the chunks version) were written again for each file:
    #: committed file by file, a first keyword-only index of 10k notes spent about a third of its time
    #: committing (docs/benchmarks.md, "Indexing a workspace"). A crash takes back at most the batch
    #: being written; the next sync writes it again.
    write_batch_files = 256

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
        self._tokenizer: Any = None  # the keyword index's tokenizer, for query statistics
        self._vocab_ready = False
        if options.connection_hook is not None:
            options.connection_hook(self.conn)
        self._setup()

    # -- setup -----------------------------------------------------------------------------------
    def _setup(self) -> None:
        conn = self.conn
        try:
            # Only takes effect on a new, empty file (and must precede WAL mode to do so).
            conn.execute(f"PRAGMA page_size={int(self.options.page_size)}")
            mode = scalar(conn, "PRAGMA journal_mode=WAL")
            if str(mode).lower() != "wal":
                raise StoreError(f"cannot switch {self.path} to WAL mode (got {mode})")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=OFF")
            if self.options.cache_mib > 0:
                # Pages read again by the next search (the keyword index's inner pages, common
                # terms' postings, the candidates' rows) come from memory instead of a read() each:
                # at 1M chunks 5-15 % off a hybrid search in alternating runs; SQLite's own 2 MiB
                # held too few. It grows only as pages are read (docs/benchmarks.md, "A page cache").
                conn.execute(f"PRAGMA cache_size={-int(self.options.cache_mib) * 1024}")
            # Schema changes take the write lock up front (BEGIN IMMEDIATE waits on the busy timeout):
            # a deferred transaction that reads the schema first and then upgrades to a write fails at
            # once with "database is locked" when another process created the schema meanwhile.
            if self.legacy_layout():
                # Schema 1/2: read as it is until a sync rebuilds it (the identity's schemaVersion).
                if not self._has_column("chunks", "embed_hash"):
                    self._immediate(
                        lambda: self._has_column("chunks", "embed_hash")
                        or conn.execute("ALTER TABLE chunks ADD COLUMN embed_hash TEXT")
                    )
            elif not self._has_tables(_SCHEMA_TABLES):
                encoding = (
                    "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO NOTHING",
                    (VECTOR_ENCODING_KEY, VECTOR_ENCODING),
                )
                self._immediate(lambda: self.legacy_layout() or (conn.execute(_SCHEMA), conn.execute(*encoding)))
            else:
                # Schema-3 files from before a column was added: their chunks go without it (no heading
                # trail; transcript lines mapped from the text) until they are next indexed.
                for column in ("context", "line_numbers"):
                    if not self._has_column("chunks", column):
                        self._immediate(partial(self._add_text_column, "chunks", column))
        except apsw.Error as exc:
            raise StoreError(f"cannot initialise index database {self.path}: {exc}") from exc
        if self.options.fts_enabled:
            tokenizer = FTS_TOKENIZERS[self.options.fts_tokenizer]
            try:
                # Contentless: the text is stored once, in chunks; rows are deleted by rowid.
                create = (
                    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING "
                    f"fts5(text, content='', contentless_delete=1, tokenize='{tokenizer}')"
                )
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

    def _has_column(self, table: str, column: str) -> bool:
        return any(row[1] == column for row in self.conn.execute(f"PRAGMA table_info({table})"))

    def legacy_layout(self) -> bool:
        """Whether this file has the schema 1/2 layout (vectors in ``chunks.embedding``). Asked
        again wherever it matters: a rebuilt index swapped in changes the layout under an open
        connection."""
        return self._has_column("chunks", "embedding")

    def vector_encoding(self) -> str:
        """How this file stores vectors: ``float16`` (new databases) or ``float32`` (schema 1/2,
        and schema-3 files from before the encoding was recorded). Asked again like the layout."""
        if self.legacy_layout():
            return "float32"
        return self.get_kv(VECTOR_ENCODING_KEY) or "float32"

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
            tables = rows(self.conn, "SELECT name, sql FROM sqlite_master WHERE type = 'table'")
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
            return bool(scalar(self.conn, "PRAGMA quick_check") == "ok")
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

    # -- keyword index statistics --------------------------------------------------------------
    def fts_term_chunks(self, words: Sequence[str]) -> dict[str, int]:
        """How many chunks hold each word, counted in the keyword index (``fts5vocab``) after the
        index's own tokenizer (Porter stems, folded diacritics). Words it turns into more than one
        token (searched as phrases) are left out. Costs a few index lookups, not a scan."""
        tokenizer = self._query_tokenizer()
        if tokenizer is None:
            return {}
        tokens: dict[str, str] = {}
        for word in words:
            found = tokenizer(word.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False, include_colocated=False)
            if len(found) == 1:
                tokens[word] = found[0]
        if not tokens:
            return {}
        if not self._vocab_ready:
            self.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_fts_vocab USING fts5vocab(main, chunks_fts, row)")
            self._vocab_ready = True
        wanted = sorted(set(tokens.values()))
        sql = f"SELECT term, doc FROM temp.chunks_fts_vocab WHERE term IN ({','.join('?' * len(wanted))})"
        counts = {str(r[0]): int(r[1]) for r in rows(self.conn, sql, wanted)}
        return {word: int(counts.get(token, 0)) for word, token in tokens.items()}

    def _query_tokenizer(self) -> Any:
        if self._tokenizer is None:
            name, *args = FTS_TOKENIZERS[self.options.fts_tokenizer].split()
            try:
                self._tokenizer = self.conn.fts5_tokenizer(name, args)
            except (apsw.Error, AttributeError):  # no FTS5, or an apsw without tokenizer access
                self._tokenizer = False
        return self._tokenizer or None

    # -- vectors ---------------------------------------------------------------------------------
    def vec_dims(self) -> int | None:
        """Vector length the index holds (or was prepared for); None without vectors."""
        if self.legacy_layout():
            row = self.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_vec'").fetchone()
            if not row or "float[" not in row[0]:
                return None
            start = row[0].find("float[")
            return int(row[0][start + 6 : row[0].index("]", start)])
        value = self.get_kv(VECTOR_DIMS_KEY)
        return int(value) if value else None

    def ensure_vec_table(self, dims: int) -> None:
        """Record the vector length about to be written (status, and the sqlite-vec scan's filter)."""
        if self.legacy_layout() or self.vec_dims() == dims:
            return
        with self.conn:
            self.set_kv(VECTOR_DIMS_KEY, str(int(dims)))

    def space_id(self, space: VectorSpace) -> int | None:
        """The row of an embedding space, None when nothing was ever stored in it."""
        found = scalar(self.conn, "SELECT id FROM embedding_spaces WHERE provider = ? AND model = ? AND provider_key = ?", space)
        return None if found is None else int(found)

    def _space_for(self, space: VectorSpace) -> int:
        """The row of an embedding space, created if new (inside the caller's transaction)."""
        found = self.space_id(space)
        if found is not None:
            return found
        self.conn.execute("INSERT INTO embedding_spaces(provider, model, provider_key) VALUES(?, ?, ?)", space)
        return int(self.conn.last_insert_rowid())

    def vector_refs(self) -> tuple[VectorLayout, list[VectorRef]]:
        """How the vectors are stored, and a :class:`VectorRef` for every chunk with a vector."""
        layout = VectorLayout(self.legacy_layout(), self.vector_encoding())
        if layout.legacy:
            sql = "SELECT rowid, rowid || ':' || COALESCE(embed_hash, hash), source, path FROM chunks WHERE embedding IS NOT NULL"
        else:
            sql = "SELECT rowid, vector_id, source, path FROM chunks WHERE vector_id IS NOT NULL"
        return layout, [VectorRef(*r) for r in rows(self.conn, sql)]

    def vector_blobs(self, layout: VectorLayout, refs: Sequence[VectorRef]) -> list[bytes | None]:
        """The stored vectors of ``refs`` (from :meth:`vector_refs`), in order, as stored (see
        ``layout.encoding``)."""
        sql = (
            "SELECT rowid, embedding FROM chunks WHERE rowid IN ({})"
            if layout.legacy
            else "SELECT rowid, embedding FROM embedding_cache WHERE rowid IN ({})"
        )
        ids = [ref.rowid if layout.legacy else ref.key for ref in refs]
        blobs: dict[object, bytes] = {r[0]: r[1] for r in self._rows_in(sql, ids)}
        return [blobs.get(i) for i in ids]

    def _rows_in(self, sql: str, ids: Sequence[object]) -> Iterable[Any]:
        """Rows of ``sql`` (whose ``IN ({})`` takes the ids) for every id, in batches of 500."""
        for start in range(0, len(ids), 500):
            batch = list(ids[start : start + 500])
            yield from rows(self.conn, sql.format(",".join("?" * len(batch))), batch)

    def chunk_vectors(self, rowids: Sequence[int]) -> dict[int, bytes]:
        """The vectors of these chunks as float32 bytes (chunks without one left out)."""
        legacy, encoding = self.legacy_layout(), self.vector_encoding()
        sql = (
            "SELECT rowid, embedding FROM chunks WHERE rowid IN ({}) AND embedding IS NOT NULL"
            if legacy
            else "SELECT c.rowid, v.embedding FROM chunks c JOIN embedding_cache v ON v.rowid = c.vector_id "
            "WHERE c.rowid IN ({})"
        )
        stored = "float32" if legacy else encoding
        return {int(rowid): decode_vector(blob, stored) for rowid, blob in self._rows_in(sql, list(rowids))}

    def indexed_texts(self, rowids: Sequence[int]) -> dict[int, str]:
        """What each chunk was keyword-indexed from: its heading trail and text, before the FTS
        copy's CJK spacing (schema 1/2: that copy itself)."""
        legacy = self.legacy_layout()
        sql = (
            "SELECT rowid, text FROM chunks_fts WHERE rowid IN ({})"
            if legacy and self.caps.fts_available
            else "SELECT rowid, text FROM chunks WHERE rowid IN ({})"
            if legacy
            else "SELECT rowid, CASE WHEN context IS NULL OR context = '' THEN text ELSE context || char(10) || text END "
            "FROM chunks WHERE rowid IN ({})"
        )
        return {int(r[0]): str(r[1]) for r in self._rows_in(sql, list(rowids)) if r[1] is not None}

    def _add_text_column(self, table: str, column: str) -> None:
        if not self._has_column(table, column):  # another process may have added it meanwhile
            self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")

    def chunk_line_numbers(self, rowids: Sequence[int]) -> dict[int, str]:
        """The stored ``line_numbers`` of those chunks that have them (transcripts)."""
        if self.legacy_layout():
            return {}
        sql = "SELECT rowid, line_numbers FROM chunks WHERE line_numbers IS NOT NULL AND rowid IN ({})"
        try:
            return {int(r[0]): str(r[1]) for r in self._rows_in(sql, list(rowids))}
        except apsw.SQLError:  # a file opened read-only from before the column existed
            return {}

    # -- files -----------------------------------------------------------------------------------
    def files(self, source: str | None = None) -> dict[str, FileRow]:
        sql = "SELECT path, source, hash, mtime, size FROM files"
        args: tuple[Any, ...] = ()
        if source is not None:
            sql += " WHERE source = ?"
            args = (source,)
        return {r[0]: FileRow(*r) for r in self.conn.execute(sql, args)}

    def files_at(self, paths: Sequence[str]) -> tuple[dict[str, FileRow], dict[str, SkipRecord]]:
        """:meth:`files` and :meth:`skipped` of these paths only (a sync scoped to what moved)."""
        found = {r[0]: FileRow(*r) for r in self._rows_in("SELECT path, source, hash, mtime, size FROM files WHERE path IN ({})", paths)}
        sql = "SELECT path, source, reason, mtime, size FROM skipped_files WHERE path IN ({})"
        return found, {r[0]: SkipRecord(r[1], r[2], r[3], r[4]) for r in self._rows_in(sql, paths)}

    def skipped(self) -> dict[str, SkipRecord]:
        return {
            r[0]: SkipRecord(r[1], r[2], r[3], r[4])
            for r in self.conn.execute("SELECT path, source, reason, mtime, size FROM skipped_files")
        }

    def file_stats(self, prefix: str = "") -> list[tuple[str, int, int, int | None]]:
        """(prefix + path, mtime_ns, size, None) of every indexed and skipped file: what the index
        believes of the files, in the shape of a freshness snapshot (no Python object per row)."""
        return self.conn.execute(  # type: ignore[return-value]  # the rows are exactly that shape
            "SELECT ?1 || path, mtime, size, NULL FROM files UNION ALL SELECT ?1 || path, mtime, size, NULL FROM skipped_files",
            (prefix,),
        ).fetchall()

    def skipped_paths(self, prefix: str, reason_prefix: str) -> list[str]:
        """prefix + path of the skipped files whose reason starts with ``reason_prefix``."""
        sql = "SELECT ?1 || path FROM skipped_files WHERE substr(reason, 1, length(?2)) = ?2"
        return [r[0] for r in self.conn.execute(sql, (prefix, reason_prefix))]

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

    def _delete_file_rows(self, path: str, keep: frozenset[str] = frozenset(), *, chunks: bool = True) -> None:
        """Delete one file's rows, but for its chunks whose ids are in ``keep``. ``chunks=False``: the
        caller knows the file has none (a file indexed for the first time: two statements fewer)."""
        conn = self.conn
        if chunks:
            found = [(r[0], r[1]) for r in conn.execute("SELECT rowid, id FROM chunks WHERE path = ?", (path,))]
            rowids = [(rowid,) for rowid, chunk_id in found if chunk_id not in keep]
            if rowids and self.caps.fts_available:
                # Point deletes: a contentless table (contentless_delete) removes a row by its rowid.
                conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", rowids)
            # The chunks' vectors stay in embedding_cache: no longer referenced, they are the cache.
            if keep:
                conn.executemany("DELETE FROM chunks WHERE rowid = ?", rowids)
            else:
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
        """Atomically replace everything stored for one file. Chunk vectors (float32 bytes) go to
        their ``space`` (without one: a space named after ``model``)."""
        now = int(time.time())
        conn = self.conn
        with conn:
            spaces: dict[VectorSpace, int] = {}
            unchanged = self._unchanged_rows(file.path, chunks, model, spaces)
            kept = unchanged or frozenset()
            self._delete_file_rows(file.path, kept, chunks=unchanged is not None)
            encoding = self.vector_encoding() if any(c.embedding is not None for c in chunks) else ""
            for chunk in chunks:
                if chunk.id in kept:
                    continue
                vector_id = None
                if chunk.embedding is not None:
                    named = chunk.space or VectorSpace("", model, "")
                    if named not in spaces:
                        spaces[named] = self._space_for(named)
                    vector_id = self._store_vector(spaces[named], chunk.embed_hash or chunk.hash, encode_vector(chunk.embedding, encoding))
                conn.execute(
                    "INSERT INTO chunks(id, path, source, start_line, end_line, hash, model, text, context, line_numbers, "
                    "vector_id, updated_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO NOTHING",
                    (chunk.id, chunk.path, chunk.source, chunk.start_line, chunk.end_line, chunk.hash, model, chunk.text,
                     chunk.context, chunk.line_numbers, vector_id, now),  # fmt: skip
                )
                if conn.changes() == 0:
                    continue  # identical chunk twice in one file (repeated text): keep one
                if self.caps.fts_available:
                    conn.execute("INSERT INTO chunks_fts(rowid, text) VALUES(?, ?)", (conn.last_insert_rowid(), chunk.fts_text))
            conn.execute(
                "INSERT INTO files(path, source, hash, mtime, size, indexed_at) VALUES(?,?,?,?,?,?)",
                (file.path, file.source, file.hash, file.mtime, file.size, now),
            )
            self._bump_chunks_version()

    def _unchanged_rows(self, path: str, chunks: Sequence[ChunkRow], model: str, spaces: dict[VectorSpace, int]) -> frozenset[str] | None:
        """The ids of the file's stored chunks that its new chunks repeat exactly, kept as they are
        (None: the file has no stored chunk).

        A stored row is kept when everything it holds is the new chunk's: source, lines, text and
        its hash, model, heading context, line numbers and vector (space and embedded input). Its
        keyword entry is made from the text and context by the tokenizer the index was built for
        (a different one is another index: index/identity.py), so it is the same too, and the rows
        after are those a delete and insert of every chunk would leave (but for their rowids and
        ``updated_at``). A transcript that grew by an append rewrites only its last chunks, and a
        file's keyword index is left alone for the rest."""
        stored = {
            r[0]: r[1:]
            for r in self.conn.execute(
                "SELECT c.id, c.source, c.start_line, c.end_line, c.hash, c.text, c.model, c.context, c.line_numbers, "
                "v.space, v.hash FROM chunks c "
                "LEFT JOIN embedding_cache v ON v.rowid = c.vector_id WHERE c.path = ?",
                (path,),
            )
        }
        if not stored:
            return None
        kept: set[str] = set()
        for chunk in chunks:
            row = stored.get(chunk.id)
            if row is None:
                continue
            vector: tuple[int | None, str | None] = (None, None)
            if chunk.embedding is not None:
                named = chunk.space or VectorSpace("", model, "")
                if named not in spaces:
                    spaces[named] = self._space_for(named)
                vector = (spaces[named], chunk.embed_hash or chunk.hash)
            if row == (chunk.source, chunk.start_line, chunk.end_line, chunk.hash, chunk.text, model, chunk.context,
                       chunk.line_numbers, *vector):  # fmt: skip
                kept.add(chunk.id)
        return frozenset(kept)

    def _store_vector(self, space: int, embed_hash: str, stored: bytes) -> int:
        """The row of this vector (already in the file's encoding), stored if new. A stored vector
        never changes (same input, same model, same vector): the first one stays, and in-memory
        copies may trust its rowid."""
        return int(
            scalar(
                self.conn,
                "INSERT INTO embedding_cache(space, hash, embedding, updated_at) VALUES(?,?,?,?) "
                "ON CONFLICT(space, hash) DO UPDATE SET updated_at = excluded.updated_at RETURNING rowid",
                (space, embed_hash, stored, time.time_ns()),
            )
        )

    # -- counts ----------------------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for source, n in self.conn.execute("SELECT source, COUNT(*) FROM files GROUP BY source"):
            out.setdefault(source, {"files": 0, "chunks": 0})["files"] = n
        for source, n in self.conn.execute("SELECT source, COUNT(*) FROM chunks GROUP BY source"):
            out.setdefault(source, {"files": 0, "chunks": 0})["chunks"] = n
        return out

    def chunk_spans(self, path: str, first_line: int, last_line: int, limit: int) -> list[tuple[int, int, int, bool]]:
        """(start line, end line, text length, has a vector) of ``path``'s chunks that overlap the
        lines ``first_line``..``last_line``, in line order (the inspector's chunk view)."""
        has_vector = "embedding IS NOT NULL" if self.legacy_layout() else "vector_id IS NOT NULL"
        found = rows(
            self.conn,
            f"SELECT start_line, end_line, length(text), {has_vector} FROM chunks "
            "WHERE path = ? AND end_line >= ? AND start_line <= ? ORDER BY start_line, end_line LIMIT ?",
            (path, first_line, last_line, limit),
        )
        return [(int(r[0]), int(r[1]), int(r[2]), bool(r[3])) for r in found]

    def has_source(self, source: str) -> bool:
        """Whether any chunk of ``source`` is indexed (one lookup in idx_chunks_source)."""
        return self.conn.execute("SELECT 1 FROM chunks WHERE source = ? LIMIT 1", (source,)).fetchone() is not None

    def file_count(self) -> int:
        return int(scalar(self.conn, "SELECT COUNT(*) FROM files"))

    def chunk_count(self) -> int:
        return int(scalar(self.conn, "SELECT COUNT(*) FROM chunks"))

    def keyword_segments(self) -> int:
        """How many FTS5 segments the keyword index is split into (0 without one)."""
        if not self.caps.fts_available:
            return 0
        return int(scalar(self.conn, "SELECT COUNT(DISTINCT segid) FROM chunks_fts_idx"))

    def compact_keyword_index(self, *, built: bool, small_only: bool = False) -> bool:
        """Merge the keyword index into one FTS5 segment (FTS5's ``optimize``) when it is split, after
        a sync that wrote to it (in a transaction of its own: index/syncing.py); True when it did.

        Each sync's transaction adds a segment, and FTS5's automerge keeps up to three per level:
        14 at 203 chunks. A query looks each term up in every segment and merges their posting
        lists: one segment took the keyword query from 2.1 to 0.9–1.2 ms at 203 chunks (SQLite's own
        time, docs/benchmarks.md, "One keyword segment"); rankings are the same (bm25 reads the same
        statistics). ``optimize`` rewrites the whole keyword index (0.03–0.05 s at 10k chunks), so:
        always after a first index or a rebuild (``built``); after an incremental sync, up to
        ``COMPACT_ALWAYS_CHUNKS``, and beyond that, when more than ``COMPACT_SEGMENTS`` segments,
        up to ``COMPACT_MAX_CHUNKS``; larger indexes keep FTS5's automerge alone. ``small_only``: a
        sync someone waits for (scoped to what moved: a search, an edit) merges only indexes up to
        ``COMPACT_ALWAYS_CHUNKS``; the larger merge (0.5-0.9 s at 100k chunks) waits for a full sync."""
        segments = self.keyword_segments()
        if segments <= 1:
            return False
        if not built:
            # The largest rowid bounds the count from above: a small index is not counted (COUNT(*)
            # reads a whole index).
            bound = int(scalar(self.conn, "SELECT COALESCE(MAX(rowid), 0) FROM chunks"))
            chunks = bound if bound <= COMPACT_ALWAYS_CHUNKS else self.chunk_count()
            if chunks > COMPACT_ALWAYS_CHUNKS and (small_only or segments <= COMPACT_SEGMENTS or chunks > COMPACT_MAX_CHUNKS):
                return False
        self.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('optimize')")
        return True

    def data_version(self) -> int:
        """Changes whenever another connection commits (cheap staleness check for caches)."""
        return int(scalar(self.conn, "PRAGMA data_version"))

    # -- embedding cache -------------------------------------------------------------------------
    # Every stored vector, the ones chunks use included: cache_get finds a chunk's vector before
    # its file is rewritten, so an edit re-embeds only the chunks whose text changed.
    def cache_get(self, provider: str, model: str, key: str, hashes: Iterable[str]) -> dict[str, bytes]:
        if self.legacy_layout():
            return {}
        space = self.space_id(VectorSpace(provider, model, key))
        if space is None:
            return {}
        encoding = self.vector_encoding()
        found: dict[str, bytes] = {}
        wanted = list(hashes)
        for start in range(0, len(wanted), 400):
            batch = wanted[start : start + 400]
            marks = ",".join("?" * len(batch))
            sql = f"SELECT hash, embedding FROM embedding_cache WHERE space = ? AND hash IN ({marks})"
            found.update((r[0], decode_vector(r[1], encoding)) for r in rows(self.conn, sql, (space, *batch)))
        return found

    def cache_touch(self, provider: str, model: str, key: str, hashes: Sequence[str]) -> None:
        space = self.space_id(VectorSpace(provider, model, key))
        if space is None:
            return
        now = time.time_ns()
        with self.conn:  # one transaction, not one per row
            self.conn.executemany(
                "UPDATE embedding_cache SET updated_at = ? WHERE space = ? AND hash = ?", [(now, space, h) for h in hashes]
            )

    def cache_put(self, provider: str, model: str, key: str, items: Sequence[tuple[str, bytes]]) -> None:
        if not items:
            return
        space = self._space_for(VectorSpace(provider, model, key))
        encoding = self.vector_encoding()
        for h, blob in items:
            self._store_vector(space, h, encode_vector(blob, encoding))

    def cache_prune(self, max_entries: int | None) -> int:
        """Drop the least recently used vectors no chunk uses, down to ``max_entries`` of them."""
        if max_entries is None or self.legacy_layout():
            return 0
        unused = (
            "SELECT rowid FROM embedding_cache WHERE rowid NOT IN "
            "(SELECT vector_id FROM chunks WHERE vector_id IS NOT NULL)"
        )
        excess = int(scalar(self.conn, f"SELECT COUNT(*) FROM ({unused})")) - max_entries
        if excess <= 0:
            return 0
        self.conn.execute(
            f"DELETE FROM embedding_cache WHERE rowid IN ({unused} ORDER BY updated_at ASC LIMIT ?)", (excess,)
        )
        return excess

    def cache_size(self) -> int:
        """Stored vectors, in use or not."""
        return int(scalar(self.conn, "SELECT COUNT(*) FROM embedding_cache"))

    def cache_unused(self) -> int:
        """Stored vectors no chunk uses: the cache proper, which ``cache.maxEntries`` bounds."""
        if self.legacy_layout():
            return self.cache_size()  # schema 1/2: the cache is a table of its own
        return int(scalar(
            self.conn,
            "SELECT COUNT(*) FROM embedding_cache WHERE rowid NOT IN (SELECT vector_id FROM chunks WHERE vector_id IS NOT NULL)",
        ))

    def seed_cache_from(self, old_path: Path) -> int:
        """Copy every vector of another index (the live one a rebuild replaces) into this one's
        cache; returns how many were new. Reads schema 3 and schema 1/2 files (their chunks'
        vectors and their cache): migrating an index re-embeds nothing."""
        if not old_path.exists():
            return 0
        conn = self.conn
        before = self.cache_size()
        try:
            conn.execute("ATTACH DATABASE ? AS old", (str(old_path),))
        except apsw.Error:
            return 0
        try:
            with conn:
                tables = {r[0] for r in rows(conn, "SELECT name FROM old.sqlite_master WHERE type='table'")}
                columns = {r[1] for r in rows(conn, "PRAGMA old.table_info(chunks)")} if "chunks" in tables else set()
                stored = {str(r[0]): str(r[1]) for r in rows(conn, "SELECT key, value FROM old.meta")} if "meta" in tables else {}
                # How the old file stores its vectors (schema 1/2 and early schema-3 files: float32).
                old_encoding = "float32" if "embedding" in columns else stored.get(VECTOR_ENCODING_KEY, "float32")
                copy = _VectorCopy(self, old_encoding)
                if "embedding_spaces" in tables:
                    conn.execute(
                        "INSERT OR IGNORE INTO embedding_spaces(provider, model, provider_key) "
                        "SELECT provider, model, provider_key FROM old.embedding_spaces"
                    )
                    copy.run(
                        "SELECT s.id, c.hash, c.embedding, c.updated_at FROM old.embedding_cache c "
                        "JOIN old.embedding_spaces o ON o.id = c.space "
                        "JOIN embedding_spaces s ON s.provider = o.provider AND s.model = o.model AND s.provider_key = o.provider_key "
                        "ORDER BY c.rowid"
                    )
                elif "embedding_cache" in tables:  # schema 1/2
                    conn.execute(
                        "INSERT OR IGNORE INTO embedding_spaces(provider, model, provider_key) "
                        "SELECT DISTINCT provider, model, provider_key FROM old.embedding_cache"
                    )
                    copy.run(
                        "SELECT s.id, c.hash, c.embedding, c.updated_at FROM old.embedding_cache c "
                        "JOIN embedding_spaces s ON s.provider = c.provider AND s.model = c.model AND s.provider_key = c.provider_key"
                    )
                meta = json.loads(stored[META_KEY]) if META_KEY in stored else {}
                if "embedding" in columns and meta.get("provider") not in (None, "none"):
                    # Schema 1/2 kept every chunk's vector in the chunk row as well (the cache may
                    # have been pruned below them).
                    space = self._space_for(VectorSpace(meta["provider"], meta["model"], meta["providerKey"]))
                    hashed = "COALESCE(embed_hash, hash)" if "embed_hash" in columns else "hash"
                    copy.run(
                        f"SELECT ?, {hashed}, embedding, ? FROM old.chunks WHERE embedding IS NOT NULL ORDER BY rowid",
                        (space, time.time_ns()),
                    )
        except (apsw.Error, ValueError, KeyError, TypeError):
            pass  # a damaged old index only costs re-embedding
        finally:
            try:
                conn.execute("DETACH DATABASE old")
            except apsw.Error:
                pass
        return self.cache_size() - before

    # -- transactions ----------------------------------------------------------------------------
    def transaction(self) -> AbstractContextManager[object]:
        return self.conn  # apsw: the connection as a context manager is one transaction


class _VectorCopy:
    """Copies (space, hash, vector, updated_at) rows selected from an attached database into
    ``embedding_cache``, re-encoding each vector from ``source`` to this file's encoding (in SQL
    when they are the same)."""

    def __init__(self, db: IndexDB, source: str) -> None:
        self.db = db
        self.source = source
        self.target = db.vector_encoding()

    def run(self, select: str, args: Sequence[Any] = ()) -> None:
        insert = "INSERT OR IGNORE INTO embedding_cache(space, hash, embedding, updated_at) "
        if self.source == self.target:
            self.db.conn.execute(insert + select, tuple(args))
            return
        cursor = self.db.conn.execute(select, tuple(args))
        while batch := list(itertools.islice(cursor, 1000)):
            converted = [(r[0], r[1], encode_vector(decode_vector(r[2], self.source), self.target), r[3]) for r in batch]
            self.db.conn.executemany(insert + "VALUES(?, ?, ?, ?)", converted)
