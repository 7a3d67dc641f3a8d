"""A sync scoped to what moved since a trusted snapshot: a full sync's work on the files that changed,
without listing and comparing every file.

A full sync lists every directory and compares every file with the index: seconds at 100k files, for
what is usually one edited note. A caller that holds a snapshot of the files taken when the index last
matched them (freshness/snapshot.py: its last sync's, or the one the index stores for a new process)
learns from one ``stat`` of each of its files and directories exactly what moved:

* a file whose mtime, size or ctime moved is examined as a full sync examines it;
* a file that is gone is removed from the index;
* a directory whose mtime moved had entries created, removed or renamed: that directory alone is
  listed, and its new Markdown files and everything under a new subdirectory are examined;
* a transcript whose append an earlier sync left for later (``Snapshot.deferred``) is examined again,
  moved or not, as a full walk finds its row behind the file.

What it leaves to the full walk (:func:`plan_scope` returns None): a symbolic link among the new
entries or a file with more than one name (discovery's rules for those span every file), any
``extraPaths`` (discovery drops a file two roots reach), a directory that moved outside ``memory/``
and the workspace folder (transcripts, host logs: their own discovery), the workspace folder while
transcripts may appear in it, a snapshot taken too close to a change, a file the index knows by
another name (a host's log), and a snapshot read from the index (a new process's) when the index's
last sync did not complete or another writer changed the index since (a note deleted and synced away
by another process, then restored with its old mtime and size, would look unmoved to it: such a
snapshot holds no ctimes). Whoever asks for a scoped sync still runs full ones now and then (the watcher's
re-check, ``sync.reconcileIntervalMs``).
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.freshness.snapshot import DIRS_KEY, Delta, Snapshot, SnapshotEntry
from mdrecall.index.indexer import is_racy
from mdrecall.sources.workspace import MEMORY_DIR, ROOT_MEMORY_FILE, SKIP_DIR_NAMES, MemoryFile, rel_path_for
from mdrecall.store.db import FileRow, IndexDB, SkipRecord


@dataclass(slots=True)
class SyncScope:
    """What a scoped sync looks at, and what it leaves as the files' state afterwards."""

    #: the files to examine (changed, or new), as discovery would name them
    files: list[MemoryFile]
    #: stored paths whose files are gone
    removed: list[str]
    #: the index's rows of those files (all it needs of the index)
    existing: dict[str, FileRow]
    skipped: dict[str, SkipRecord]
    #: every directory's mtime, read before it was listed (the next snapshot's), and whether one was racy
    dirs: dict[str, int]
    dirs_racy: bool
    #: the snapshot's entries of the files that did not move (the next snapshot's, with the examined ones)
    carried: list[SnapshotEntry]


class _GiveUp(Exception):
    """Something only the full walk decides."""


def plan_scope(
    workspace: Path, config: MemoryConfig, base: Snapshot, delta: Delta | None, db: IndexDB, *, other_sources: bool
) -> SyncScope | None:
    """The scoped sync since ``base`` (a snapshot of the files when the index matched them; ``delta``:
    what moved since, when the caller already looked), or None when the full walk must decide.
    ``other_sources``: sources besides the memory files (transcripts)."""
    if config.extraPaths:
        return None  # discovery's dedup spans roots
    if base.index_version is not None and (not db.get_kv(DIRS_KEY) or base.index_version != db.chunks_version()):
        # Read from the index: its last sync left work undone (no record), or another writer changed
        # it since (rows base no longer shows). A snapshot a sync of this process took knows what it
        # left undone (``deferred``).
        return None
    if delta is None:
        delta = base.delta()
    if delta is None:
        return None
    ws = str(workspace)
    mem = os.path.join(ws, MEMORY_DIR)
    known: set[str] = set()  # the snapshot's files, gathered once a directory has to be listed

    def known_files() -> set[str]:
        if not known:
            known.update(entry[0] for entry in base.files)
        return known

    dirs = dict(delta.dirs)
    new_files: list[str] = []
    racy = [delta.racy]
    try:
        for directory in delta.changed_dirs:
            if directory not in delta.dirs:
                continue  # gone: its files are among the vanished, its parent moved too
            if directory == ws:
                if other_sources:
                    raise _GiveUp  # a sessions folder may have appeared here
                root_file = os.path.join(ws, ROOT_MEMORY_FILE)
                if root_file not in known_files() and os.path.lexists(root_file):
                    if os.path.islink(root_file):
                        raise _GiveUp
                    new_files.append(root_file)
                if os.path.isdir(mem) and mem not in base.dirs:
                    _walk_new(mem, dirs, new_files, racy)
                continue
            if not (directory == mem or directory.startswith(mem + os.sep)) or _through_link(directory, mem):
                raise _GiveUp
            _list_changed(directory, known_files(), base.dirs, dirs, new_files, racy)
        # Appends a sync left for later: a full walk finds their rows behind the files and examines
        # them again (indexing them, or leaving them again while below the thresholds); so does this.
        moved = {*delta.changed, *delta.vanished}
        settle = [path for path in sorted(base.deferred) if path not in moved]
        if any(path not in known_files() for path in settle):
            raise _GiveUp  # named otherwise than in the snapshot
        changed = [*delta.changed, *settle]
        return _scope(workspace, db, changed, new_files, delta.vanished, dirs, racy[0], delta.carried(base, settle))
    except (_GiveUp, OSError):
        return None


def _through_link(directory: str, mem: str) -> bool:
    """Whether ``directory`` (under ``memory/``) is reached through a symbolic link below ``memory/``."""
    return os.path.realpath(directory) != os.path.realpath(mem) + directory[len(mem) :]


def _list_changed(directory: str, known: set[str], known_dirs: dict[str, int], dirs: dict[str, int], out: list[str],
                  racy: list[bool]) -> None:  # fmt: skip
    """The new Markdown files of a directory whose entries changed, and all under its new subdirectories."""
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(".") or name in SKIP_DIR_NAMES or entry.path in known or entry.path in known_dirs:
                continue  # hidden and skipped as discovery skips them; known ones had their own stat
            if entry.is_symlink():
                raise _GiveUp
            if entry.is_dir(follow_symlinks=False):
                _walk_new(entry.path, dirs, out, racy)
            elif name.endswith(".md") and entry.is_file(follow_symlinks=False):
                out.append(entry.path)


def _walk_new(directory: str, dirs: dict[str, int], out: list[str], racy: list[bool]) -> None:
    """Everything under a directory the snapshot did not know, its mtime recorded before listing it
    (as ``scan_dirs`` records it: a file created after the listing moves the recorded mtime)."""
    mtime = os.stat(directory).st_mtime_ns
    dirs[directory] = mtime
    racy[0] = racy[0] or is_racy(mtime, time.time_ns())
    _list_changed(directory, set(), {}, dirs, out, racy)


def _scope(workspace: Path, db: IndexDB, changed: list[str], new: list[str], vanished: list[str], dirs: dict[str, int],
           dirs_racy: bool, carried: list[SnapshotEntry]) -> SyncScope:  # fmt: skip
    names = {path: rel_path_for(workspace, path) for path in [*changed, *new, *vanished]}
    existing, skipped = db.files_at(sorted(set(names.values())))
    files: list[MemoryFile] = []
    for path in changed:
        rel = names[path]
        row = existing.get(rel) or skipped.get(rel)
        if row is None:
            raise _GiveUp  # a file the index knows by another name (a host's log): its own discovery
        files.append(MemoryFile(path, rel, row.source))
    files += [MemoryFile(path, names[path], "memory") for path in new]
    for file in files:
        st = os.lstat(file.abspath)
        if stat.S_ISLNK(st.st_mode) or st.st_nlink > 1:
            raise _GiveUp  # a link, or a file with other names: discovery's rules for those span every file
    if any(names[path] not in existing and names[path] not in skipped for path in vanished):
        raise _GiveUp  # a file the index knows by another name (a host's log): its own discovery
    removed = [names[path] for path in vanished]
    files.sort(key=lambda f: f.rel_path)
    return SyncScope(files, sorted(removed), existing, skipped, dirs, dirs_racy, carried)


__all__ = ["SyncScope", "plan_scope"]
