"""What a full sync would do now: the files on disk compared with the index, without writing.

A walk with one ``stat`` per file (mtime+size), no reads except a transcript's appended tail. Used by
``status()`` (so ``clean`` describes the files as they are) and by searches that cannot sync in time
(to say whether their answer is stale).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.sources.base import SourceAdapter
from mdrecall.sources.workspace import MemoryFile, discover_memory_files
from mdrecall.store.db import FileRow, SkipRecord

#: Paths listed per kind of change (the counts are always complete).
LISTED = 50

#: What a comparison saw of one file: (mtime_ns, size, when stat ran in ns, ctime_ns). A backend
#: that records no ctime gives the first three; its quick checks then miss a chmod alone.
Observed = tuple[int, int, int, int] | tuple[int, int, int]

#: Reason prefix of a skip caused by the OS refusing the read (permissions, a lock, an I/O error).
UNREADABLE = "cannot read"


def is_readable(path: str | Path) -> bool:
    """Whether opening ``path`` for reading succeeds now (one open, no read)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    os.close(fd)
    return True


def skip_still_holds(record: SkipRecord, path: str | Path, mtime: int, size: int) -> bool:
    """Whether a skipped file would be skipped again (the indexer and this comparison agree).

    Content reasons (binary, too large, invalid UTF-8) hold while mtime and size do. An unreadable
    file says nothing about its content, and ``chmod`` moves neither mtime nor size (only ctime):
    such a skip holds only while the file still cannot be opened, checked on every full comparison
    (one failed ``open``, as cheap as the ``stat``).
    """
    if (record.mtime, record.size) != (mtime, size):
        return False
    return not record.reason.startswith(UNREADABLE) or not is_readable(path)


@dataclass(slots=True)
class PendingChanges:
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    #: Transcripts whose only change is an append below the delta thresholds (left for later by
    #: automatic syncs; still counted, so ``clean`` stays honest).
    deferred: list[str] = field(default_factory=list)
    #: the same files' absolute paths, as discovery names them (a freshness snapshot's keys)
    deferred_files: list[str] = field(default_factory=list)
    files_on_disk: int = 0
    files_indexed: int = 0

    @property
    def count(self) -> int:
        return len(self.new) + len(self.changed) + len(self.deleted)

    @property
    def outstanding(self) -> int:
        """Changes an automatic sync would index now (the deferred appends excluded)."""
        return self.count - len(self.deferred)

    def to_dict(self) -> dict[str, Any]:
        return {
            "new": sorted(self.new)[:LISTED],
            "changed": sorted(self.changed)[:LISTED],
            "deleted": sorted(self.deleted)[:LISTED],
            "deferred": sorted(self.deferred)[:LISTED],
            "deferredCount": len(self.deferred),
            "count": self.count,
            "filesOnDisk": self.files_on_disk,
            "filesIndexed": self.files_indexed,
        }


def list_source_files(workspace: Path, config: MemoryConfig, adapters: Sequence[SourceAdapter]) -> list[MemoryFile]:
    files = discover_memory_files(workspace, config) if "memory" in config.sources else []
    for adapter in adapters:
        files.extend(adapter.discover())
    return files


def pending_changes(
    workspace: Path,
    config: MemoryConfig,
    adapters: Sequence[SourceAdapter],
    indexed: Mapping[str, FileRow],
    skipped: Mapping[str, SkipRecord],
    observed: dict[str, Observed] | None = None,
) -> PendingChanges:
    """Compare the files with the index. ``observed`` collects (mtime, size, when, ctime) per
    absolute path for a freshness snapshot."""
    by_source = {a.source: a for a in adapters}
    on_disk: dict[str, tuple[int, int, str, str]] = {}
    for f in list_source_files(workspace, config, adapters):
        try:
            st = os.stat(f.abspath)
        except OSError:
            continue
        on_disk[f.rel_path] = (st.st_mtime_ns, st.st_size, f.abspath, f.source)
        if observed is not None:
            observed[f.abspath] = (st.st_mtime_ns, st.st_size, time.time_ns(), st.st_ctime_ns)
    out = PendingChanges(files_on_disk=len(on_disk), files_indexed=len(indexed))
    for rel, (mtime, size, abspath, source) in on_disk.items():
        row = indexed.get(rel)
        if row is not None:
            if row.mtime == mtime and row.size == size and row.source == source:
                continue
            out.changed.append(rel)
            adapter = by_source.get(source)
            if row.source == source and adapter is not None and adapter.deferrable(Path(abspath), row.size, size):
                out.deferred.append(rel)
                out.deferred_files.append(abspath)
        elif rel in skipped:
            if not skip_still_holds(skipped[rel], abspath, mtime, size):
                out.changed.append(rel)
        else:
            out.new.append(rel)
    out.deleted = [p for p in indexed if p not in on_disk] + [p for p in skipped if p not in on_disk]
    return out
