"""The builtin engine's SQLite indexes in a forget: rows out, vectors out, no byte left in free pages.

Every index of the workspace is cleaned, not only the one in use: the shared index, the ones ``-c``
overrides keep beside it (``<index>.override-<key>.sqlite``), an index at the default location when
the config names another, and their damaged copies (``<index>.corrupt-<time>``, deleted: they hold
old versions of every file). For each, under its writer lock:

1. the rows of every touched file go (chunks, keyword rows, the file's record): the index in use
   re-indexes the file's new text right after, the others on their next sync;
2. every vector no chunk uses is deleted, the forgotten chunks' among them: an older version of a
   forgotten line may be among the unused ones too, and a hash does not say which (the cost: text
   that comes back is embedded again);
3. the file is scrubbed: ``PRAGMA secure_delete``, FTS5 ``optimize`` (a contentless table's delete
   only marks its rows; the merge rewrites its segments without them), ``VACUUM`` (deleted cells and
   free pages keep their bytes otherwise, as the tests show), and ``wal_checkpoint(TRUNCATE)`` (old
   pages live on in the write-ahead log until it is truncated).

A schema-2 index (read until its first sync rebuilds it) is deleted instead: it is rebuilt from the files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from mdrecall.errors import StoreError
from mdrecall.store import WriterLock, default_store_path
from mdrecall.store.db import IndexDB, StoreOptions
from mdrecall.store.sql import rows

if TYPE_CHECKING:
    from mdrecall.config import MemoryConfig
    from mdrecall.contract import MemorySearchManager
    from mdrecall.forget.report import StoreReport

#: How long to wait for a sync in another process to release an index.
LOCK_TIMEOUT_S = 120.0
#: How long to wait for readers to leave the write-ahead log before truncating it.
CHECKPOINT_TIMEOUT_S = 20.0

#: Lines chosen per stored path; None: the whole file.
Affected = dict[str, "set[int] | None"]


def store_options(config: MemoryConfig, path: Path) -> StoreOptions:
    return StoreOptions(
        # The keyword rows must go whatever the config says now: FTS5 is on when the file has the table.
        fts_enabled=_has_keyword_table(path),
        fts_tokenizer=config.query.fts.tokenizer,
        vector_enabled=False,  # nothing here needs sqlite-vec
        busy_timeout_ms=config.store.busyTimeoutMs,
        cache_mib=config.store.cacheMiB,
    )


def _has_keyword_table(path: Path) -> bool:
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return True
    try:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_fts'").fetchone() is not None
    except apsw.Error:
        return True
    finally:
        conn.close()


def index_files(manager: MemorySearchManager) -> list[Path]:
    """Every builtin index of this workspace that exists, the one in use first."""
    candidates: list[Path] = []
    primary = getattr(manager, "db_path", None)
    if manager.backend == "builtin" and isinstance(primary, Path):
        candidates.append(primary)
    configured = manager.config.store.path
    shared = [Path(configured).expanduser()] if configured else []
    shared.append(default_store_path(manager.workspace))
    for base in shared:
        candidates.append(base)
        candidates.extend(sorted(base.parent.glob(f"{base.stem}.override-*.sqlite")))
    out: list[Path] = []
    seen: set[str] = set()
    for path in candidates:
        real = os.path.realpath(path)
        if real not in seen and path.is_file():
            seen.add(real)
            out.append(path)
    return out


def paths_holding(manager: MemorySearchManager, needle: str) -> set[str]:
    """Stored paths whose chunks in any of the workspace's indexes hold ``needle`` (ASCII case folded,
    as SQLite's ``lower`` does): left-overs of a forget that stopped half-way, or of an index a
    ``-c`` override has not synced since the file changed."""
    found: set[str] = set()
    for path in index_files(manager):
        try:
            conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error:
            continue
        try:
            conn.setbusytimeout(manager.config.store.busyTimeoutMs)
            found.update(str(r[0]) for r in conn.execute(
                "SELECT DISTINCT path FROM chunks WHERE instr(lower(text), lower(?)) > 0", (needle,)))  # fmt: skip
        except apsw.Error:
            pass  # not an index of ours (or a damaged one): its copies are the byte scan's to report
        finally:
            conn.close()
    return found


def primary_index(manager: MemorySearchManager) -> Path | None:
    path = getattr(manager, "db_path", None)
    return path if manager.backend == "builtin" and isinstance(path, Path) and path.is_file() else None


class _Locked:
    def __init__(self, path: Path) -> None:
        self.lock = WriterLock(path)

    def __enter__(self) -> None:
        if not self.lock.acquire(LOCK_TIMEOUT_S):
            raise StoreError(f"{self.lock.path.with_suffix('')} has been busy (another sync) for {LOCK_TIMEOUT_S:.0f}s: "
                             "not cleaned; forgetting the same target again finishes it")  # fmt: skip

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def _open(path: Path, options: StoreOptions) -> IndexDB:
    db = IndexDB(path, options)
    db.conn.execute("PRAGMA secure_delete=ON")
    return db


def remove_rows(path: Path, options: StoreOptions, affected: Affected, entry: StoreReport) -> set[int] | None:
    """Delete the touched files' rows; returns the vector rows the chosen lines' chunks used (None:
    a schema-2 index, deleted whole)."""
    from mdrecall.store import remove_db_files

    with _Locked(path):
        db = _open(path, options)
        try:
            if db.legacy_layout():
                db.close()
                remove_db_files(path)
                entry.notes.append("a schema-2 index: deleted (it is rebuilt from the files)")
                return None
            vectors: set[int] = set()
            chunks = others = 0
            for rel, lines in affected.items():
                for start, end, vector_id in rows(db.conn, "SELECT start_line, end_line, vector_id FROM chunks WHERE path = ?", (rel,)):
                    if lines is None or any(start <= n <= end for n in lines):
                        chunks += 1
                        if vector_id is not None:
                            vectors.add(int(vector_id))
                    else:
                        others += 1
                db.remove_file(rel)
            entry.add("chunks holding the lines", chunks)
            if db.caps.fts_available:
                entry.add("keyword rows", chunks)
            if others:
                entry.notes.append(f"{others} other chunk(s) of the same files removed too, re-indexed from the new text")
            return vectors
        finally:
            db.close()


def scrub_index(path: Path, options: StoreOptions, forgotten_vectors: set[int], entry: StoreReport) -> None:
    """Drop unused vectors and scrub the file (see the module docstring); removes damaged copies."""
    from mdrecall.store import cleanup_stale_rebuilds

    with _Locked(path):
        cleanup_stale_rebuilds(path)
        db = _open(path, options)
        try:
            in_use = {int(r[0]) for r in rows(db.conn, "SELECT DISTINCT vector_id FROM chunks WHERE vector_id IS NOT NULL")}
            stored = {int(r[0]) for r in rows(db.conn, "SELECT rowid FROM embedding_cache")}
            gone = (forgotten_vectors & stored) - in_use
            unused = len(stored - in_use)
            with db.conn:
                db.cache_prune(0)
            entry.add("vectors", len(gone))
            entry.add("unused cached vectors", unused - len(gone))
            entry.notes.extend(scrub_sqlite(db.conn))
        finally:
            db.close()
    damaged = sorted(path.parent.glob(f"{path.name}.corrupt-*"))
    for copy in damaged:
        copy.unlink(missing_ok=True)
    if damaged:
        entry.add("damaged copies deleted", len([p for p in damaged if not p.name.endswith(("-wal", "-shm"))]))


def scrub_sqlite(conn: apsw.Connection) -> list[str]:
    """Leave no deleted byte in the file or its write-ahead log; returns notes on what was done."""
    conn.execute("PRAGMA secure_delete=ON")
    tables = rows(conn, "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")
    for name, sql in tables:
        if "fts5" in str(sql).lower():
            quoted = '"' + str(name).replace('"', '""') + '"'
            conn.execute(f"INSERT INTO {quoted}({quoted}) VALUES('optimize')")
    conn.execute("VACUUM")
    notes = ["vacuumed"]
    mode = conn.execute("PRAGMA journal_mode").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        return notes
    if checkpoint_truncate(conn):
        notes.append("write-ahead log truncated")
    else:
        notes.append(f"write-ahead log NOT truncated: another process kept reading for {CHECKPOINT_TIMEOUT_S:.0f}s")
    return notes


def checkpoint_truncate(conn: apsw.Connection) -> bool:
    """Fold the write-ahead log into the file and truncate it to zero bytes; False if readers kept it."""
    deadline = time.monotonic() + CHECKPOINT_TIMEOUT_S
    while True:
        try:
            row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except apsw.BusyError:
            row = (1, -1, -1)
        if row is None or int(row[0]) == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def scrub_qmd(manager: MemorySearchManager, entry_for: Callable[[str], StoreReport]) -> None:
    """``backend: qmd``: QMD's own index, re-synced by then, scrubbed like ours (its keyword tables
    merged, VACUUM, the log truncated). QMD may hold it open; SQLite's locks keep that safe."""
    layout = getattr(manager, "layout", None)
    db = getattr(layout, "db_path", None)
    if manager.backend != "qmd" or not isinstance(db, Path) or not db.is_file():
        return
    entry = entry_for(str(db))
    conn = apsw.Connection(str(db))
    try:
        conn.setbusytimeout(int(CHECKPOINT_TIMEOUT_S * 1000))
        try:  # its vector tables are sqlite-vec's: load it when we can (VACUUM copies them either way)
            import sqlite_vec

            conn.enable_load_extension(True)
            conn.load_extension(sqlite_vec.loadable_path())
        except Exception:
            pass
        entry.notes.extend(scrub_sqlite(conn))
    finally:
        conn.close()
