"""One sync of the live index, with the writer lock held: incremental, or a rebuild swapped in whole.

An incremental sync updates the live index file by file (:mod:`mdrecall.index.indexer`). When the
stored identity no longer fits the configuration (another model, other chunking, other roots), or
``force`` asks for it, the whole index is built in a separate file, seeded with the live index's
embedding cache (so unchanged chunks are not embedded again), and swapped in with SQLite's backup
API: readers see the old index until the new one commits.

The very first index has nothing to keep answering from, so it is built in place, its identity
written first: an interrupted first index (a short-lived MCP client that exits, a killed process)
keeps every file it finished, and the next sync carries on from there.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from mdrecall.config import MemoryConfig
from mdrecall.crashpoints import crash_point
from mdrecall.embeddings.base import EmbeddingProvider
from mdrecall.errors import StoreError
from mdrecall.freshness.snapshot import DIRS_KEY, Delta, Snapshot, SnapshotEntry, dirs_record, scan_dirs
from mdrecall.index.changes import Observed
from mdrecall.index.chunking import ResumableChunker
from mdrecall.index.identity import identity_mismatch
from mdrecall.index.indexer import Indexer, SyncContext, seed_cache_from
from mdrecall.index.scope import plan_scope
from mdrecall.sources.base import SourceAdapter
from mdrecall.store import cleanup_stale_rebuilds, rebuild_path, remove_db_files, swap_in
from mdrecall.store.db import IndexDB, StoreOptions
from mdrecall.store.errors import clear_write_errors, write_failure
from mdrecall.types import ProgressCallback, SyncProgress, SyncReport

#: Where the index records when any process last finished a sync (epoch seconds).
LAST_SYNC_KEY = "last_sync_at"
#: The workspace (real path) the index was built for: ``mdrecall gc`` finds indexes of deleted workspaces.
WORKSPACE_KEY = "workspace_dir"


@dataclass(slots=True)
class SyncRun:
    """What one sync did and saw: its report, and (mtime, size, when, ctime) of every file it looked at."""

    report: SyncReport
    observed: Mapping[str, Observed] = field(default_factory=dict)
    #: the directories' mtimes, read before their files were listed, and whether one was racy
    dirs: tuple[dict[str, int], bool] = field(default_factory=lambda: ({}, True))
    #: a sync of what moved (index/scope.py): the earlier snapshot's entries of the files it left alone
    carried: list[SnapshotEntry] = field(default_factory=list)
    #: absolute paths of the transcripts whose appends it left for later
    deferred: list[str] = field(default_factory=list)


class IndexSyncer:
    def __init__(
        self,
        workspace: Path,
        config: MemoryConfig,
        db_path: Path,
        options: StoreOptions,
        extra_sources: Sequence[SourceAdapter],
        on_read: Callable[[str, tuple[int, int], bytes], None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.config = config
        self.db_path = db_path
        self.options = options
        self.extra_sources = list(extra_sources)
        #: Transcripts grow by appends: each sync chunks one from where it changed (index/chunking.py).
        self.chunker = ResumableChunker()
        #: Progress of a rebuild in this process (model switch, chunking change), else None.
        self.migration: dict[str, Any] | None = None
        #: Set to stop a running sync at its next file (:meth:`BuiltinMemoryManager.close`).
        self.cancel = threading.Event()
        self._dirs: tuple[dict[str, int], bool] | None = None
        #: What each sync hands the files it read to (``SyncContext.on_read``).
        self.on_read = on_read

    def run(
        self,
        provider: EmbeddingProvider | None,
        provider_key: str,
        desired: dict[str, Any],
        *,
        force: bool,
        progress: ProgressCallback | None,
        defer_sessions: bool,
        base: tuple[Snapshot, Delta | None] | None = None,
    ) -> SyncRun:
        """Sync now; the caller holds the writer lock. ``base``: a snapshot of the files taken when
        the index last matched them (and what moved since, if known); an incremental sync then looks
        only at what moved (index/scope.py) where it can. The directories' mtimes, read before their files are listed,
        are stored for the next process's freshness check when the sync completes. A full disk (or
        another write failure that is not damage) raises one clear StoreError; the old index keeps
        answering."""
        self._dirs = None
        with clear_write_errors(self.db_path):
            return self._run(provider, provider_key, desired, force=force, progress=progress, defer_sessions=defer_sessions,
                             base=base)  # fmt: skip

    def _finish(self, db: IndexDB, report: SyncReport) -> None:
        """The last writes of a sync (inside its final transaction): when it finished, for which
        workspace, and the directory mtimes a new process checks before trusting the index
        (freshness/snapshot.py), only when the sync left nothing for later."""
        db.set_kv(LAST_SYNC_KEY, repr(time.time()))
        db.set_kv(WORKSPACE_KEY, os.path.realpath(self.workspace))
        dirs = self._dirs
        complete = dirs is not None and not dirs[1] and report.files_deferred == 0
        db.set_kv(DIRS_KEY, dirs_record(self.workspace, dirs[0]) if complete and dirs is not None else "")

    def _run(
        self,
        provider: EmbeddingProvider | None,
        provider_key: str,
        desired: dict[str, Any],
        *,
        force: bool,
        progress: ProgressCallback | None,
        defer_sessions: bool,
        base: tuple[Snapshot, Delta | None] | None,
    ) -> SyncRun:
        cleanup_stale_rebuilds(self.db_path)
        ctx = SyncContext(provider, provider_key, desired["model"], self.cancel, self.on_read)
        writer = IndexDB(self.db_path, self.options)
        try:
            stored = writer.read_meta()
            mismatch = identity_mismatch(stored, desired)
            first = stored is None and writer.file_count() == 0 and not writer.skipped()
            scope = None
            deferred: list[str] = []
            if base is not None and not (first or force or mismatch):
                scope = plan_scope(self.workspace, self.config, *base, writer, other_sources=bool(self.extra_sources))
            # Before any file is listed: a file created after the listing then moves a recorded mtime.
            dirs = self._dirs = (scope.dirs, scope.dirs_racy) if scope is not None else scan_dirs(self.workspace, self.config)
            if first:
                report, observed = self._first_index(writer, ctx, desired, progress)
                report.rebuild_reason = mismatch
            elif force or mismatch:
                report, observed = self._rebuild(writer, ctx, desired, progress)
                report.rebuild_reason = "forced" if force and not mismatch else mismatch
            else:
                if provider is not None and provider.dims:
                    writer.ensure_vec_table(provider.dims)
                indexer = Indexer(
                    self.workspace, self.config, writer, ctx, progress, self.extra_sources, defer_sessions=defer_sessions,
                    chunker=self.chunker,
                )
                report = indexer.run(full=False, scope=scope)
                observed, deferred = indexer.observed, indexer.deferred
                self._drop_unused_vectors(writer)
                with writer.conn:
                    self._finish(writer, report)
                if report.files_indexed or report.files_removed:
                    _compact(writer, built=False, small_only=scope is not None)
                crash_point("sync:before-finish")
        finally:
            writer.close()
        return SyncRun(report, observed, dirs, scope.carried if scope is not None else [], deferred)

    def _drop_unused_vectors(self, db: IndexDB) -> None:
        """With ``cache.enabled: false``, no vector outlives the chunks that use it. (This file keeps
        every vector once, in its cache table: with the cache on, the indexer bounds the unused ones
        by ``cache.maxEntries``.)"""
        if not self.config.cache.enabled:
            db.cache_prune(0)

    def _progress(self, stored: dict[str, Any] | None, desired: dict[str, Any], progress: ProgressCallback | None) -> ProgressCallback:
        """Record a full build's progress in ``self.migration`` (status, search warnings) and pass it on."""
        migration: dict[str, Any] = {
            "from": {"provider": stored.get("provider"), "model": stored.get("model")} if stored else None,
            "to": {"provider": desired["provider"], "model": desired["model"]},
            "completed": 0,
            "total": 0,
            "label": "starting",
        }
        self.migration = migration

        def track(p: SyncProgress) -> None:
            migration.update(completed=p.completed, total=p.total, label=p.label)
            if progress is not None:
                progress(p)

        return track

    def _first_index(
        self, writer: IndexDB, ctx: SyncContext, desired: dict[str, Any], progress: ProgressCallback | None
    ) -> tuple[SyncReport, dict[str, Observed]]:
        if ctx.provider is not None and ctx.provider.dims:
            writer.ensure_vec_table(ctx.provider.dims)
        with writer.conn:
            writer.write_meta(desired)
        try:
            indexer = Indexer(self.workspace, self.config, writer, ctx, self._progress(None, desired, progress), self.extra_sources,
                              chunker=self.chunker)
            report = indexer.run(full=True)
            self._drop_unused_vectors(writer)
            with writer.conn:
                self._finish(writer, report)
            _compact(writer, built=True)
        finally:
            self.migration = None
        report.full_rebuild = True
        return report, indexer.observed

    def _rebuild(
        self, live: IndexDB, ctx: SyncContext, desired: dict[str, Any], progress: ProgressCallback | None
    ) -> tuple[SyncReport, dict[str, Observed]]:
        temp_path = rebuild_path(self.db_path)
        built = IndexDB(temp_path, self.options)
        try:
            seed_cache_from(built, self.db_path)
            crash_point("rebuild:seeded")
            if ctx.provider is not None and ctx.provider.dims:
                built.ensure_vec_table(ctx.provider.dims)
            track = self._progress(live.read_meta() or None, desired, progress)
            indexer = Indexer(self.workspace, self.config, built, ctx, track, self.extra_sources, chunker=self.chunker)
            report = indexer.run(full=True)
            self._drop_unused_vectors(built)
            with built.conn:
                built.write_meta(desired)
                self._finish(built, report)
            _compact(built, built=True)
            crash_point("rebuild:built")
            live.close()
            swap_in(built, self.db_path, self.options.busy_timeout_ms)
        finally:
            self.migration = None
            built.close()
            remove_db_files(temp_path)
        report.full_rebuild = True
        return report, indexer.observed


def _compact(db: IndexDB, *, built: bool, small_only: bool = False) -> None:
    """The keyword index merged into one segment (``IndexDB.compact_keyword_index``), in a transaction
    of its own after the sync's: the merge needs room for a second copy of the keyword index while it
    runs, and a full disk must cost only the merge (the index stays as the sync left it), never the
    sync."""
    try:
        with db.conn:
            db.compact_keyword_index(built=built, small_only=small_only)
    except (apsw.Error, OSError, StoreError) as exc:
        if write_failure(exc, db.path) is None:
            raise
