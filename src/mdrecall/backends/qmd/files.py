"""Which memory files moved since QMD last indexed them: a walk with mtime+size, no QMD process.

``qmd update`` re-hashes every file and costs a process start (0.2-0.4 s); this walk costs a stat
per file. The freshness monitor asks it before every automatic sync, so ``qmd update`` runs only
when something changed, and ``status()`` uses it for ``clean`` and ``pendingChanges``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.index.changes import Observed, PendingChanges, list_source_files
from mdrecall.sources.base import SourceAdapter

#: A walk of the memory files: relative path -> (mtime_ns, size, absolute path, source).
OnDisk = dict[str, tuple[int, int, str, str]]
#: What the last successful ``qmd update`` saw: relative path -> (mtime_ns, size, source).
FileStamps = dict[str, tuple[int, int, str]]


def stat_files(workspace: Path, config: MemoryConfig, adapters: Sequence[SourceAdapter],
               observed: dict[str, Observed]) -> OnDisk:  # fmt: skip
    """Every memory file and transcript now; fills ``observed`` (abspath -> mtime, size, when, ctime)
    for a freshness snapshot (ctime: a chmod that makes a file readable moves only that)."""
    on_disk: OnDisk = {}
    for f in list_source_files(workspace, config, adapters):
        try:
            st = os.stat(f.abspath)
        except OSError:
            continue
        on_disk[f.rel_path] = (st.st_mtime_ns, st.st_size, f.abspath, f.source)
        observed[f.abspath] = (st.st_mtime_ns, st.st_size, time.time_ns(), st.st_ctime_ns)
    return on_disk


def indexed_stamps(on_disk: OnDisk) -> FileStamps:
    return {rel: (mtime, size, source) for rel, (mtime, size, _abspath, source) in on_disk.items()}


def pending_changes(on_disk: OnDisk, indexed: Mapping[str, tuple[int, int, str]], adapters: Sequence[SourceAdapter]) -> PendingChanges:
    """The files on disk against ``indexed``; transcript appends below the delta thresholds are
    ``deferred``, as in the builtin."""
    pending = PendingChanges(files_on_disk=len(on_disk), files_indexed=len(indexed))
    by_source = {a.source: a for a in adapters}
    for rel, (mtime, size, abspath, source) in on_disk.items():
        known = indexed.get(rel)
        if known is None:
            pending.new.append(rel)
        elif known != (mtime, size, source):
            pending.changed.append(rel)
            adapter = by_source.get(source)
            if adapter is not None and known[2] == source and adapter.deferrable(Path(abspath), known[1], size):
                pending.deferred.append(rel)
    pending.deleted = [rel for rel in indexed if rel not in on_disk]
    return pending
