"""Helpers for the reliability tests: compare an index with a fresh rebuild, hash a workspace."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw


def scramble_index_page(db_path: Path) -> None:
    """Overwrite the root page of the chunks' path index with random bytes: damage the open probe
    (first and last rows of each table) never reads, and the full ``quick_check`` finds."""
    import os

    con = apsw.Connection(str(db_path))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'idx_chunks_path'").fetchone()
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(db_path.read_bytes())
    data[(root - 1) * page_size : root * page_size] = os.urandom(page_size)
    db_path.write_bytes(bytes(data))


def integrity(db_path: Path) -> str:
    # Read-write, as the next opener would be: after a SIGKILL the WAL may need replaying, which a
    # read-only connection refuses (ReadOnlyError) although the database is intact.
    con = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        return "; ".join(str(r[0]) for r in con.execute("PRAGMA integrity_check"))
    finally:
        con.close()


def index_content(db_path: Path) -> dict[str, Any]:
    """Everything a search can see, independent of rowids and timestamps."""
    con = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {
            "files": sorted(con.execute("SELECT path, source, hash, mtime, size FROM files").fetchall()),
            "chunks": sorted(
                con.execute("SELECT id, path, source, start_line, end_line, hash, text FROM chunks").fetchall()
            ),
            "fts": _fts_terms(con),
            "fts_rows": con.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0],
            "skipped": sorted(con.execute("SELECT path, source, reason, mtime, size FROM skipped_files").fetchall()),
        }
    finally:
        con.close()


def _fts_terms(con: apsw.Connection) -> list[tuple[str, str]]:
    """Each chunk's indexed tokens in order, as one string per chunk id. The keyword index is
    contentless (it stores no text to compare), so its tokens are read through ``fts5vocab``."""
    con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_instances USING fts5vocab(main, chunks_fts, instance)")
    tokens: dict[str, list[tuple[int, str]]] = {}
    rows = con.execute("SELECT c.id, v.offset, v.term FROM temp.fts_instances v JOIN chunks c ON c.rowid = v.doc")
    for chunk, offset, term in rows:
        tokens.setdefault(chunk, []).append((offset, term))
    return sorted((chunk, " ".join(term for _, term in sorted(found))) for chunk, found in tokens.items())


def fresh_index(workspace: Path, config: dict[str, Any], db_path: Path) -> dict[str, Any]:
    """Index ``workspace`` from scratch into ``db_path`` and return its content."""
    from mdrecall import open_manager

    fresh = {**config, "store": {**config.get("store", {}), "path": str(db_path)}}
    with open_manager(workspace, fresh, use_global_config=False) as m:
        m.sync()
    return index_content(db_path)


def diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    """A short description of how two index contents differ ("" when equal)."""
    out = []
    for key in a:
        if a[key] != b[key]:
            if isinstance(a[key], list):
                only_a = [r[:2] for r in set(a[key]) - set(b[key])][:5]
                only_b = [r[:2] for r in set(b[key]) - set(a[key])][:5]
                out.append(f"{key}: only in first {only_a}, only in second {only_b}")
            else:
                out.append(f"{key}: {a[key]} != {b[key]}")
    return "\n".join(out)


def hash_tree(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (the user's Markdown must never change)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, what: str | None = None) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout`` seconds pass (its last answer); with
    ``what``, a timeout fails the test saying what never happened."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    if predicate():
        return True
    if what is not None:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")
    return False


def counting_walks(monkeypatch: Any) -> list[int]:
    """Every full listing of the files a sync makes from now on (``Indexer.discover``), by its count:
    a sync scoped to what moved (index/scope.py) makes none."""
    from mdrecall.index.indexer import Indexer

    walks: list[int] = []
    real = Indexer.discover

    def counting(self: Indexer) -> Any:
        found = real(self)
        walks.append(len(found))
        return found

    monkeypatch.setattr(Indexer, "discover", counting)
    return walks
