"""``migrate-store``: copy a builtin SQLite index into the Postgres store, without re-embedding.

Files, chunks (text, vectors, keyword text), skipped files and the embedding cache are copied as
this agent, in one transaction under the agent's sync lock: other agents see the agent's old rows
until the copy commits, then the new ones. Visibility is decided as a sync would, from each file's
text in the workspace when that text still has the indexed hash (otherwise the file stays private
until the next sync, which re-reads the changed file anyway). When the SQLite index was built with the embedding
model this agent is configured for, its meta is rewritten in the Postgres backend's form, so the next
sync is incremental (nothing to re-chunk, nothing to embed).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from mdrecall.backends.postgres.bulk import copy_chunks
from mdrecall.backends.postgres.schema import SCHEMA
from mdrecall.backends.postgres.store import TEAM_IDENTITY_KEY, PgStore
from mdrecall.backends.postgres.visibility import classify
from mdrecall.errors import StoreError
from mdrecall.index.syncing import LAST_SYNC_KEY
from mdrecall.store.db import META_KEY, VECTOR_ENCODING_KEY
from mdrecall.text import fts_index_text

S = SCHEMA


@dataclass
class MigrationReport:
    source: str
    files: int = 0
    chunks: int = 0
    vectors: int = 0
    skipped: int = 0
    cache_entries: int = 0
    team_files: int = 0
    meta_rewritten: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _read_text(workspace: Path, rel: str, digest: str) -> str | None:
    try:
        raw = (workspace / rel).read_bytes()
    except OSError:
        return None
    if hashlib.sha256(raw).hexdigest() != digest:
        return None
    return raw.decode("utf-8", errors="replace")


def migrate_sqlite(sqlite_path: Path, store: PgStore, workspace: Path, desired_meta: dict[str, Any] | None = None,
                   *, lock_timeout: float = 10.0) -> MigrationReport:
    """Copy the SQLite index at ``sqlite_path`` into ``store`` as its agent. ``desired_meta``: the
    Postgres manager's meta for this workspace (written when the embedding identity matches)."""
    if not sqlite_path.is_file():
        raise StoreError(f"no SQLite index at {sqlite_path}")
    started = time.monotonic()
    report = MigrationReport(str(sqlite_path))
    src = apsw.Connection(str(sqlite_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master")}
        if not {"files", "chunks", "meta"} <= tables:
            raise StoreError(f"{sqlite_path} is not an mdrecall index")
        meta_row = src.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
        meta = json.loads(meta_row[0]) if meta_row else None
        files: list[tuple[Any, ...]] = src.execute("SELECT path, source, hash, mtime, size, indexed_at FROM files").fetchall()
        legacy = any(r[1] == "embedding" for r in src.execute("PRAGMA table_info(chunks)"))
        chunk_sql, cache_sql, encoding = _layout_sql(src, tables, legacy)
        skipped = src.execute("SELECT path, source, reason, mtime, size FROM skipped_files").fetchall()
        cache: list[tuple[Any, ...]] = src.execute(cache_sql).fetchall() if cache_sql else []

        visibility: dict[str, str] = {}
        contents: dict[str, str | None] = {}
        for path, source, digest, *_ in files:
            text = _read_text(workspace, path, digest)
            visibility[path] = classify(path, source, text, store.settings.sharedFolders)
            contents[path] = text if visibility[path] == "team" else None

        def chunk_rows() -> Any:
            for cid, path, source, start, end, digest, model, text, blob, embed_hash, fts_text, updated in src.execute(chunk_sql):
                vector = _vector(blob, encoding) if blob else None
                if not legacy:  # schema 3's keyword index is contentless: rebuild what it was fed
                    fts_text = fts_index_text(f"{fts_text}\n{text}" if fts_text else text)
                report.chunks += 1
                report.vectors += vector is not None
                yield (cid, path, source, start, end, digest, model, text, vector, embed_hash,
                       fts_text, visibility.get(path, "private"), updated)

        identity = None
        if meta and meta.get("provider") not in (None, "none"):
            dims = meta.get("vectorDims")
            identity = {"provider": meta["provider"], "model": meta["model"], "providerKey": meta["providerKey"], "dims": dims}
        with store.agent_lock(lock_timeout) as got:
            if not got:
                raise StoreError(f"agent {store.identity.agent_id!r} is syncing elsewhere; try again")
            if identity is not None:
                in_force = json.loads(store.claim_team_kv(TEAM_IDENTITY_KEY, json.dumps(identity, sort_keys=True)))
                if in_force.get("providerKey") != identity["providerKey"]:
                    raise StoreError(
                        f"team {store.identity.team_id!r} stores vectors of {in_force.get('provider')}/{in_force.get('model')}; "
                        f"this index holds {identity['provider']}/{identity['model']}: re-index with the team's model instead"
                    )
                if identity.get("dims"):
                    store.ensure_vec_table(int(identity["dims"]))
            with store.connection() as conn, conn.transaction():
                for table in ("chunks", "files", "skipped_files"):
                    conn.execute(f"DELETE FROM {S}.{table} WHERE team_id = {S}.current_team() AND agent_id = {S}.current_agent()")
                # COPY cannot write tables under row-level security: files go in by (pipelined) INSERTs.
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {S}.files (path, source, hash, mtime, size, indexed_at, visibility, content) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        [(p, src_, h, m, z, t, visibility[p], contents[p]) for p, src_, h, m, z, t in files],
                    )
                    cur.executemany(
                        f"INSERT INTO {S}.skipped_files (path, source, reason, mtime, size) VALUES (%s, %s, %s, %s, %s)",
                        skipped,
                    )
                report.files = len(files)
                report.team_files = sum(1 for v in visibility.values() if v == "team")
                report.skipped = len(skipped)
                copy_chunks(conn, chunk_rows(), store.settings.textSearchConfig)
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {S}.embedding_cache(provider, model, provider_key, hash, embedding, dims, updated_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [(p, m, k, h, vec, len(vec), u) for p, m, k, h, vec, u in
                         ((p, m, k, h, _vector(e, encoding), u)
                          for p, m, k, h, e, u in sorted(cache, key=lambda r: (r[0], r[1], r[2], r[3])))],
                    )
                    report.cache_entries = len(cache)
            written = meta
            if meta is not None and desired_meta is not None and meta.get("providerKey") == desired_meta.get("providerKey") \
                    and meta.get("chunkTokens") == desired_meta.get("chunkTokens") \
                    and meta.get("chunkOverlap") == desired_meta.get("chunkOverlap"):
                written = desired_meta
                report.meta_rewritten = True
            if written is not None:
                store.write_meta(written)
            store.set_kv(LAST_SYNC_KEY, repr(time.time()))
    finally:
        src.close()
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _layout_sql(src: apsw.Connection, tables: set[str], legacy: bool) -> tuple[str, str | None, str]:
    """The chunk and cache queries for this index's layout, and how its vectors are encoded.

    Schema 1/2: vectors in ``chunks.embedding`` (float32), the FTS table holds its own text.
    Schema 3: each vector once in ``embedding_cache`` (``vector_encoding``: float16 or float32),
    the heading trail in ``chunks.context``."""
    if legacy:
        has_fts = "chunks_fts" in tables
        chunks = (
            "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.model, c.text, c.embedding, "
            "COALESCE(c.embed_hash, c.hash), " + ("COALESCE(f.text, c.text)" if has_fts else "c.text") + ", c.updated_at "
            "FROM chunks c" + (" LEFT JOIN chunks_fts f ON f.rowid = c.rowid" if has_fts else "")
        )
        cache = ("SELECT provider, model, provider_key, hash, embedding, updated_at FROM embedding_cache"
                 if "embedding_cache" in tables else None)  # fmt: skip
        return chunks, cache, "float32"
    row = src.execute("SELECT value FROM meta WHERE key = ?", (VECTOR_ENCODING_KEY,)).fetchone()
    has_context = any(r[1] == "context" for r in src.execute("PRAGMA table_info(chunks)"))
    chunks = (
        "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.model, c.text, v.embedding, "
        "COALESCE(v.hash, c.hash), " + ("c.context" if has_context else "NULL") + ", c.updated_at "
        "FROM chunks c LEFT JOIN embedding_cache v ON v.rowid = c.vector_id"
    )
    # Only the vectors no chunk uses are the cache proper; the chunks' own go in with them.
    cache = ("SELECT s.provider, s.model, s.provider_key, v.hash, v.embedding, v.updated_at "
             "FROM embedding_cache v JOIN embedding_spaces s ON s.id = v.space")  # fmt: skip
    return chunks, cache, str(row[0]) if row else "float32"


def _vector(blob: bytes, encoding: str) -> Any:
    return np.frombuffer(blob, dtype=np.float16 if encoding == "float16" else np.float32).astype(np.float32)


__all__ = ["MigrationReport", "migrate_sqlite"]
