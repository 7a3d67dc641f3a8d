"""Incremental indexing: find what changed, chunk it, embed what the cache lacks, write it atomically.

Cost model: an unchanged file costs one ``stat`` (mtime+size match) or one read+hash (touched but
identical). A changed file is re-chunked; only chunks whose text hash has no cached embedding are
embedded, in large batches. Each file's rows are replaced as soon as all of its embeddings exist, in a
transaction of a few files (the store's ``write_batch_files``, or half a second of writing): a stopped
sync keeps every finished file, a crash or a Ctrl-C takes back at most the batch being written, and
none leaves a half-written file.

Trusting mtime+size has one hole: file timestamps come from a coarse clock, so a file rewritten with
the same size within the same clock tick as our read keeps its mtime, and the change would never be
seen. Files read within ``RACY_WINDOW_NS`` of their mtime ("racily clean", as git calls it) are
therefore read and hashed once more after the window has passed, before the sync returns.

Automatic syncs (``defer_sessions``) leave a growing transcript alone until the appended bytes or
lines reach ``sync.sessions.deltaBytes`` / ``deltaMessages`` (checked against the stored size and
hash, so only true appends are deferred); explicit syncs and rebuilds index everything.

What the indexer asks of a store, all of it: ``files``, ``skipped``, ``record_skipped``,
``touch_file``, ``remove_file``, ``replace_file``, ``write_batch_files``, ``cache_get``,
``cache_touch``, ``cache_put``, ``cache_prune`` and ``transaction``
(:class:`~mdrecall.store.protocol.IndexStore`). Vectors cross
that boundary as float32 bytes (``vector_to_blob``), each chunk's with its embedding space
(``ChunkRow.space``); how a store keeps them is its own affair (the SQLite index: float16, once).

Why this module is long: discovery, change detection, batched embedding with an interrupt that
keeps finished files, and the atomic per-file write are one loop over one set of pending files;
split, each part would need the others' state.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mdrecall.config import MemoryConfig
from mdrecall.crashpoints import crash_point
from mdrecall.embeddings.base import EmbeddingProvider
from mdrecall.errors import PathError, SyncInterrupted
from mdrecall.index.changes import UNREADABLE, Observed, skip_still_holds
from mdrecall.index.chunking import (
    Chunk,
    ResumableChunker,
    chunk_id,
    chunk_lines,
    chunk_markdown,
    encode_numbers,
    fit_to_model,
    heading_trails,
)
from mdrecall.sources.base import SourceAdapter
from mdrecall.sources.redact import redact_markdown
from mdrecall.sources.workspace import MemoryFile, allowed_roots, discover_memory_files, read_memory_bytes
from mdrecall.store.db import ChunkRow, FileRow, IndexDB, SkipRecord, VectorSpace, vector_to_blob
from mdrecall.store.protocol import IndexStore
from mdrecall.text import fts_index_text
from mdrecall.types import ProgressCallback, SyncProgress, SyncReport

if TYPE_CHECKING:
    from mdrecall.index.scope import SyncScope

#: Texts embedded per call; large calls keep the model at its raw throughput.
EMBED_GROUP = 512
#: Files whose writes commit together: at most the store's ``write_batch_files``, written within this
#: many seconds (what a crash can take back, and how long another process waits to see progress). A
#: stop between files (``SyncContext.cancel``) commits the files before it.
WRITE_BATCH_S = 0.5

#: A file read less than this after its mtime may still change without its mtime moving.
RACY_WINDOW_NS = 50_000_000
#: The same on filesystems that store whole seconds (FAT, some network mounts).
RACY_WINDOW_COARSE_NS = 2_000_000_000
#: Upper bound on waiting for racy files to settle (a clock skewed into the future must not hang a sync).
RACY_MAX_WAIT_S = 2.5


def is_racy(mtime_ns: int, checked_ns: int) -> bool:
    """Whether a file seen at ``checked_ns`` could still change without its mtime moving."""
    window = RACY_WINDOW_COARSE_NS if mtime_ns % 1_000_000_000 == 0 else RACY_WINDOW_NS
    return checked_ns - mtime_ns < window


@dataclass
class PendingFile:
    file: MemoryFile
    row: FileRow
    chunks: list[Chunk]
    #: Source line numbers per rendered line for transcripts (None for Markdown: identity).
    line_map: list[int] | None = None
    #: Heading trail per chunk, indexed for keywords beside the chunk text.
    contexts: list[str] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)  # chunk indexes still without a vector
    vectors: dict[int, bytes] = field(default_factory=dict)

    def embed_input(self, i: int) -> str:
        """What the model reads for chunk ``i``: its heading trail, then its text."""
        context = self.contexts[i] if self.contexts else ""
        return f"{context}\n{self.chunks[i].text}" if context else self.chunks[i].text

    def embed_key(self, i: int) -> str:
        """Embedding-cache key: the hash of exactly what was embedded."""
        if not self.contexts or not self.contexts[i]:
            return self.chunks[i].hash
        return hashlib.sha256(self.embed_input(i).encode("utf-8")).hexdigest()


@dataclass
class SyncContext:
    provider: EmbeddingProvider | None
    provider_key: str
    model: str
    #: Set to stop the sync at the next file (a closing manager): every file finished is kept.
    cancel: threading.Event | None = None
    #: ``on_read(stored path, (mtime_ns, size), raw)``: a file this sync read to index it, with the
    #: stat taken before the read (not for one changed too recently to trust it). The builtin engine
    #: hands it to the search's cache of line data (search/filelines.py): the next search that cites
    #: the file does not read it again.
    on_read: Callable[[str, tuple[int, int], bytes], None] | None = None

    def stopping(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def check(self) -> None:
        if self.stopping():
            raise SyncInterrupted("the sync was stopped (the manager is closing); the files finished are kept")


def _read_text(path: Path, max_bytes: int, lenient: bool = False) -> tuple[str | None, bytes | None, str | None]:
    """(text, raw bytes, skip reason)."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return None, None, f"larger than limits.maxFileBytes ({size} > {max_bytes} bytes)"
        raw = path.read_bytes()
    except OSError as exc:
        return None, None, f"{UNREADABLE}: {exc.strerror or exc}"
    return _decode_text(raw, max_bytes, lenient)


def _decode_text(raw: bytes, max_bytes: int, lenient: bool = False) -> tuple[str | None, bytes | None, str | None]:
    if len(raw) > max_bytes:
        return None, None, f"larger than limits.maxFileBytes ({len(raw)} > {max_bytes} bytes)"
    if lenient:
        return raw.decode("utf-8", errors="replace"), raw, None
    if b"\x00" in raw:
        return None, raw, "binary file (contains NUL bytes)"
    try:
        return raw.decode("utf-8"), raw, None
    except UnicodeDecodeError as exc:
        return None, raw, f"not valid UTF-8 (byte {exc.start})"


def read_memory_text(
    workspace: Path,
    config: MemoryConfig,
    file: MemoryFile,
    roots: Sequence[str],
    *,
    names_inside: Callable[[os.stat_result], int] | None = None,
) -> tuple[str | None, bytes | None, str | None]:
    """(text, raw bytes, skip reason) of a memory file, read as ``memory_get`` reads it: through one
    descriptor checked after opening (sources.workspace.read_memory_bytes), so a file swapped for a
    link or hard-linked outside the memory paths (``roots``) is skipped, never indexed; secrets
    redacted and provenance comments left out, lines kept in place (so citations hold)."""
    max_bytes = config.limits.maxFileBytes
    real = os.path.realpath(file.abspath)
    if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        return None, None, "links outside the allowed memory paths"
    if not real.endswith(".md"):
        return None, None, "links to a file that is not Markdown"  # as memory_get refuses it
    try:
        raw = read_memory_bytes(workspace, config, real, max_bytes, names_inside=names_inside)
    except PathError as exc:
        return None, None, str(exc)
    except OSError as exc:
        return None, None, f"{UNREADABLE}: {exc.strerror or exc}"
    text, raw_bytes, reason = _decode_text(raw, max_bytes)
    # Imported here, not at the top: a search in a new process imports this module (freshness checks
    # use it) but reads no file, and sources.remember brings the Markdown writer with it.
    from mdrecall.sources.remember import strip_provenance

    return (strip_provenance(redact_markdown(text)) if text is not None else None), raw_bytes, reason


#: ``on_text(file, text)``: the exact text a file is about to be chunked from.
TextObserver = Callable[[MemoryFile, str], None]


class Indexer:
    """One sync of ``db`` (any :class:`~mdrecall.store.protocol.IndexStore`) with the files.

    ``on_text`` sees each file's text before it is chunked and written: a store that decides who may
    see a file from its content, or keeps a copy of it (the Postgres backend), takes it there.
    """

    def __init__(
        self,
        workspace: Path,
        config: MemoryConfig,
        db: IndexStore,
        ctx: SyncContext,
        progress: ProgressCallback | None = None,
        extra_sources: Sequence[SourceAdapter] = (),
        *,
        defer_sessions: bool = False,
        on_text: TextObserver | None = None,
        chunker: ResumableChunker | None = None,
    ) -> None:
        self.workspace = workspace
        self.config = config
        self.db = db
        self.ctx = ctx
        self.progress = progress
        self.extra_sources = list(extra_sources)
        self.defer_sessions = defer_sessions
        self.on_text = on_text
        #: Chunks rendered files (transcripts) from where they changed since this process last chunked them.
        self.chunker = chunker
        #: absolute path -> (mtime_ns, size, when stat ran in ns, ctime_ns) for every file looked at (freshness/snapshot.py).
        self.observed: dict[str, Observed] = {}
        #: absolute paths of the transcripts whose appends this sync left for later (``defer_sessions``)
        self.deferred: list[str] = []
        self._discovered: list[MemoryFile] = []
        self._roots: list[str] | None = None
        self._inode_names: dict[tuple[int, int], int] | None = None

    # -- discovery -------------------------------------------------------------------------------
    def discover(self) -> list[MemoryFile]:
        files: list[MemoryFile] = []
        if "memory" in self.config.sources:
            files.extend(discover_memory_files(self.workspace, self.config))
        for adapter in self.extra_sources:
            files.extend(adapter.discover())
        return files

    def _adapter_for(self, source: str) -> SourceAdapter | None:
        for adapter in self.extra_sources:
            if adapter.source == source:
                return adapter
        return None

    def _chunk(self, file: MemoryFile, text: str) -> tuple[list[Chunk], list[int] | None]:
        tokens, overlap = self.config.chunking.tokens, self.config.chunking.overlap
        adapter = self._adapter_for(file.source)
        provider = self.ctx.provider
        if adapter is not None:
            lines, line_map = adapter.render(file, text)
            if self.chunker is not None:
                fit = (provider.count_tokens_many, provider.max_input_tokens, self.ctx.provider_key) if provider is not None else None
                return self.chunker.chunk(file.rel_path, lines, line_map, tokens, overlap, fit), line_map
            chunks = chunk_lines(lines, tokens, overlap, line_map)
        else:
            chunks, line_map = chunk_markdown(text, tokens, overlap), None
        if provider is not None and chunks:
            chunks = fit_to_model(chunks, provider.count_tokens_many, provider.max_input_tokens)
        return chunks, line_map

    # -- main ------------------------------------------------------------------------------------
    def run(self, full: bool = False, scope: SyncScope | None = None) -> SyncReport:
        """Sync every file, or with ``scope`` (index/scope.py) only the files that moved since a
        trusted snapshot: the same examination, writes and removals for those."""
        started = time.monotonic()
        report = SyncReport(full_rebuild=full)
        if scope is None:
            self._emit(0, 0, "Scanning memory files…")
            discovered = self._discovered = self.discover()
            existing = self.db.files()
            skipped = self.db.skipped()
        else:
            discovered = self._discovered = scope.files
            existing, skipped = scope.existing, scope.skipped
        report.files_scanned = len(discovered)
        seen = {file.rel_path for file in discovered}
        racy: list[tuple[MemoryFile, int]] = []
        pending: list[PendingFile] = []
        for file in discovered:
            item = self._examine(file, existing, skipped, full, report, racy, verify=False)
            if item is not None:
                pending.append(item)
        if scope is not None:  # the files left alone are unchanged on disk, as the snapshot saw them
            report.files_scanned = len(self.observed) + len(scope.carried)
            report.files_unchanged += len(scope.carried)

        self._embed_and_write(pending, report)
        crash_point("index:before-removals")

        gone = [path for path in [*existing, *skipped] if path not in seen] if scope is None else scope.removed
        for path in gone:
            self.db.remove_file(path)
            if path in existing:
                report.files_removed += 1
                crash_point("index:file-removed")
            # What was kept in memory to resume the file's next re-index goes with it (a forgotten transcript).
            if self.chunker is not None:
                self.chunker.forget(path)
            for adapter in self.extra_sources:
                adapter.forget(path)
        self._settle_racy(racy, report)
        if self.config.cache.enabled:
            self.db.cache_prune(self.config.cache.maxEntries)
        report.seconds = time.monotonic() - started
        self._emit(report.files_indexed, len(pending), "Done")
        return report

    def _examine(
        self,
        file: MemoryFile,
        existing: dict[str, FileRow],
        skipped: dict[str, SkipRecord],
        full: bool,
        report: SyncReport,
        racy: list[tuple[MemoryFile, int]],
        verify: bool,
    ) -> PendingFile | None:
        """Decide what one file needs; returns the work to do, or None. ``verify`` ignores mtime+size."""
        try:
            st = os.stat(file.abspath)
        except OSError:
            return None
        checked_ns = time.time_ns()
        mtime, size = st.st_mtime_ns, st.st_size
        self.observed[file.abspath] = (mtime, size, checked_ns, st.st_ctime_ns)
        old = existing.get(file.rel_path)
        trust_stat = not full and not verify
        if trust_stat and old is not None and old.mtime == mtime and old.size == size and old.source == file.source:
            report.files_unchanged += 1
            return None
        prev_skip = skipped.get(file.rel_path)
        if trust_stat and prev_skip is not None and skip_still_holds(prev_skip, file.abspath, mtime, size):
            report.files_skipped += 1
            return None
        adapter = self._adapter_for(file.source)
        if adapter is None:
            text, raw, reason = self._read_memory(file)
        else:
            text, raw, reason = _read_text(file.path, self.config.limits.maxFileBytes, lenient=adapter.lenient_decode)
        racy_now = is_racy(mtime, checked_ns)
        if reason is not None or text is None or raw is None:
            record = SkipRecord(file.source, reason or UNREADABLE, mtime, size)
            if prev_skip != record:  # an unreadable file is retried every sync: no rewrite when nothing changed
                self.db.record_skipped(file.rel_path, *record)
            if not verify:
                report.files_skipped += 1
            if racy_now:
                racy.append((file, mtime))
            return None
        digest = hashlib.sha256(raw).hexdigest()
        if not full and old is not None and old.hash == digest and old.source == file.source:
            if old.mtime != mtime or old.size != size:
                self.db.touch_file(file.rel_path, mtime, size)
            if not verify:
                report.files_unchanged += 1
            if racy_now:
                racy.append((file, mtime))
            return None
        if (
            self.defer_sessions
            and not full
            and old is not None
            and old.source == file.source
            and len(raw) > old.size
            and adapter is not None
            and adapter.defer_growth(raw, old.size)
            and hashlib.sha256(raw[: old.size]).hexdigest() == old.hash  # a pure append, nothing rewritten
        ):
            report.files_deferred += 1
            self.deferred.append(file.abspath)
            return None
        if racy_now:
            racy.append((file, mtime))
        elif self.ctx.on_read is not None:
            self.ctx.on_read(file.rel_path, (mtime, size), raw)
        if self.on_text is not None:
            self.on_text(file, text)
        chunks, line_map = self._chunk(file, text)
        contexts = heading_trails(text, chunks) if line_map is None else []
        return PendingFile(file, FileRow(file.rel_path, file.source, digest, mtime, size), chunks, line_map, contexts)

    def _read_memory(self, file: MemoryFile) -> tuple[str | None, bytes | None, str | None]:
        if self._roots is None:
            self._roots = [str(r) for r in allowed_roots(self.workspace, self.config)]
        return read_memory_text(self.workspace, self.config, file, self._roots, names_inside=self._names_inside)

    def _names_inside(self, st: os.stat_result) -> int:
        """How many discovered memory files name this inode (one stat pass, only once a hard link is seen)."""
        if self._inode_names is None:
            names: dict[tuple[int, int], int] = {}
            for other in self._discovered:
                if other.source != "memory":
                    continue
                try:
                    o = os.stat(other.abspath)
                except OSError:
                    continue
                names[(o.st_dev, o.st_ino)] = names.get((o.st_dev, o.st_ino), 0) + 1
            self._inode_names = names
        return self._inode_names.get((st.st_dev, st.st_ino), 0)

    def _settle_racy(self, racy: list[tuple[MemoryFile, int]], report: SyncReport) -> None:
        """Re-read files that were read too soon after their last change (see the module docstring)."""
        for _ in range(2):
            if not racy:
                return
            newest = max(mtime for _, mtime in racy)
            window = RACY_WINDOW_COARSE_NS if newest % 1_000_000_000 == 0 else RACY_WINDOW_NS
            wait = (newest + window - time.time_ns()) / 1e9
            if wait > 0:
                time.sleep(min(wait, RACY_MAX_WAIT_S))
            existing = self.db.files()
            skipped = self.db.skipped()
            again: list[tuple[MemoryFile, int]] = []
            pending: list[PendingFile] = []
            for file, _mtime in racy:
                item = self._examine(file, existing, skipped, False, report, again, verify=True)
                if item is not None:
                    pending.append(item)
            self._embed_and_write(pending, report)
            racy = again

    def _emit(self, completed: int, total: int, label: str) -> None:
        if self.progress is not None:
            suffix = f" {completed}/{total}" if total else ""
            self.progress(SyncProgress(completed, total, label + suffix))

    def _embed_and_write(self, pending: list[PendingFile], report: SyncReport) -> None:
        ctx = self.ctx
        provider = ctx.provider
        total_chunks = sum(len(p.chunks) for p in pending)
        if provider is None:
            self._write_all(pending, report, lambda done: self._emit(done, len(pending), "Indexing memory files…"))
            return

        use_cache = self.config.cache.enabled
        # Cache lookups for every pending chunk, in one pass.
        all_hashes = {p.embed_key(i) for p in pending for i in range(len(p.chunks))}
        cached = self.db.cache_get(provider.id, provider.model, ctx.provider_key, all_hashes) if use_cache else {}
        if cached:
            self.db.cache_touch(provider.id, provider.model, ctx.provider_key, list(cached))
        for item in pending:
            for i in range(len(item.chunks)):
                blob = cached.get(item.embed_key(i))
                if blob is not None:
                    item.vectors[i] = blob
                    report.cache_hits += 1
                else:
                    item.missing.append(i)

        embedded = report.cache_hits
        group: list[PendingFile] = []
        group_size = 0
        for item in pending:
            group.append(item)
            group_size += len(item.missing)
            if group_size >= EMBED_GROUP:
                embedded = self._embed_group(group, report, embedded, total_chunks)
                group, group_size = [], 0
        if group:
            self._embed_group(group, report, embedded, total_chunks)

    def _embed_group(self, group: list[PendingFile], report: SyncReport, embedded: int, total: int) -> int:
        provider = self.ctx.provider
        assert provider is not None
        # Identical texts inside a group are embedded once.
        unique: dict[str, str] = {}
        for item in group:
            for i in item.missing:
                unique.setdefault(item.embed_key(i), item.embed_input(i))
        hashes = list(unique)
        vectors: dict[str, bytes] = {}
        waiting = list(group)  # files not written yet, in order

        def write_ready() -> None:
            # Every file whose chunks all have vectors now is written at once: an interrupted sync
            # (Ctrl-C, a closing server) keeps it, and the next sync embeds only what is left.
            ready: list[PendingFile] = []
            while waiting and all(waiting[0].embed_key(i) in vectors for i in waiting[0].missing):
                item = waiting.pop(0)
                for i in item.missing:
                    item.vectors[i] = vectors[item.embed_key(i)]
                item.missing.clear()
                ready.append(item)
            self._write_all(ready, report)

        def batch_done(indexes: list[int], batch: Sequence[Sequence[float]]) -> None:
            blobs = [(hashes[i], vector_to_blob(v)) for i, v in zip(indexes, batch)]
            self._cache(blobs)  # a failure later in the group wastes no paid calls
            vectors.update(blobs)
            self.ctx.check()
            write_ready()

        if hashes:
            texts = [unique[h] for h in hashes]
            raw_vectors = provider.embed_documents_batched(
                texts,
                lambda done, _total: self._emit(embedded + done, total, "Embedding chunks…"),
                on_batch=batch_done,
            )
            if len(raw_vectors) != len(texts):
                raise RuntimeError(f"provider {provider.id} returned {len(raw_vectors)} vectors for {len(texts)} texts")
            missed = [(h, vector_to_blob(vec)) for h, vec in zip(hashes, raw_vectors) if h not in vectors]
            self._cache(missed)  # a provider that did not report its batches
            vectors.update(missed)
            report.chunks_embedded += len(hashes)
        write_ready()
        embedded += sum(len(item.chunks) for item in group)
        self._emit(min(embedded, total), total, "Embedding chunks…")
        return embedded

    def _fts_text(self, text: str) -> str:
        return fts_index_text(text) if self.config.query.fts.tokenizer == "unicode61" else text

    def _cache(self, items: list[tuple[str, bytes]]) -> None:
        provider = self.ctx.provider
        if provider is None or not items or not self.config.cache.enabled:
            return
        with self.db.transaction():
            self.db.cache_put(provider.id, provider.model, self.ctx.provider_key, items)

    def _write_all(self, items: Sequence[PendingFile], report: SyncReport,
                   written: Callable[[int], None] | None = None) -> None:
        """Write ``items`` in order, in transactions of a bounded batch of files each (the store's
        ``write_batch_files``, :data:`WRITE_BATCH_S`); ``written(n)`` after the n-th. A stop asked for
        meanwhile ends the batch at the file being written, commits it, then raises."""
        at = 0
        batch = max(1, getattr(self.db, "write_batch_files", 1))  # a store of a plugin made before it: 1
        while at < len(items):
            self.ctx.check()
            deadline = time.monotonic() + WRITE_BATCH_S
            end = min(len(items), at + batch)
            # One file a commit: its own transaction (``replace_file``'s) is the whole of it; an outer
            # one would only add a savepoint (a round trip, on Postgres).
            with self.db.transaction() if batch > 1 else contextlib.nullcontext():
                while at < end:
                    self._write(items[at], report)
                    at += 1
                    if written is not None:
                        written(at)
                    if self.ctx.stopping() or time.monotonic() >= deadline:
                        break

    def _write(self, item: PendingFile, report: SyncReport) -> None:
        provider = self.ctx.provider
        space = VectorSpace(provider.id, provider.model, self.ctx.provider_key) if provider is not None else None
        rows = []
        for i, chunk in enumerate(item.chunks):
            rows.append(
                ChunkRow(
                    id=chunk_id(item.file.source, item.file.rel_path, chunk),
                    path=item.file.rel_path,
                    source=item.file.source,
                    start_line=chunk.start_line,
                    end_line=chunk.end_line,
                    hash=chunk.hash,
                    text=chunk.text,
                    embedding=item.vectors.get(i),
                    embed_hash=item.embed_key(i),
                    fts_text=self._fts_text(item.contexts[i] + "\n" + chunk.text if item.contexts and item.contexts[i] else chunk.text),
                    space=space if i in item.vectors else None,
                    context=(item.contexts[i] or None) if item.contexts else None,
                    line_numbers=encode_numbers(chunk.numbers),
                )
            )
        self.db.replace_file(item.row, rows, self.ctx.model)
        report.files_indexed += 1
        report.chunks_written += len(rows)
        crash_point("index:file-written")


def seed_cache_from(db: IndexDB, old_path: Path) -> None:
    """Copy reusable embeddings from the live index into a database being rebuilt."""
    db.seed_cache_from(old_path)


__all__ = ["EMBED_GROUP", "Indexer", "SyncContext", "TextObserver", "read_memory_text", "seed_cache_from"]
