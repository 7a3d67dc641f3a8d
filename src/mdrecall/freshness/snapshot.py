"""The quick check a search runs before trusting the index: "has anything changed since the last
full comparison of the files with the index?"

A full comparison (a sync, or the walk behind ``status()``) ends with a :class:`Snapshot`: the
mtime+size of every file it looked at, and the mtime of every directory under the indexed roots
(taken *before* the files were listed). Re-checking the snapshot costs one ``stat`` per file and
directory, no directory listing, no database access. It sees:

* edits, appends and truncations of known files (mtime or size moved), and permission changes
  (ctime moved: a file that was unreadable may be readable now),
* deletions (stat fails),
* creations and renames, also in new subdirectories (the containing directory's mtime moves; a
  new directory changes its parent's mtime, and every directory down from each root is recorded).

Timestamps come from a coarse clock, so an entry whose mtime is within ``RACY_WINDOW_NS`` of the
moment it was observed could change again without its mtime moving: such a snapshot is not trusted
(``delta()`` says None, forcing a full comparison that will produce a trustworthy one).

A new process has no snapshot of its own, and a full comparison of 100k files takes seconds. Each
complete sync therefore stores its directory mtimes in the index (:func:`dirs_record`, meta key
``freshness_dirs``), written with the sync's last rows; with the files and skipped files the index
already holds (mtime+size each), they are the snapshot of the files that sync saw
(:func:`stored_snapshot`). The first search of a new process checks that (one ``stat`` per file and
directory, one ``open`` per unreadable skipped file) and syncs only when it moved: the same checks as
an in-process snapshot, minus ctime (a ``chmod`` alone of an indexed file is seen by the next full
walk). A sync that left work undone (deferred transcript appends) or found the directories racy stores
no record, so the next process compares in full.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.freshness.roots import IGNORED_SEGMENTS, watch_roots
from mdrecall.index.changes import Observed, is_readable
from mdrecall.index.indexer import RACY_WINDOW_COARSE_NS, is_racy

#: One file as a snapshot holds it: (absolute path, mtime_ns, size, ctime_ns or None when none was recorded).
SnapshotEntry = tuple[str, int, int, int | None]


@dataclass
class Snapshot:
    files: list[SnapshotEntry] = field(default_factory=list)
    #: absolute directory path -> mtime_ns
    dirs: dict[str, int] = field(default_factory=dict)
    racy: bool = False
    taken_at: float = field(default_factory=time.time)
    #: files skipped because they could not be opened: unchanged while they still cannot be
    unreadable: list[str] = field(default_factory=list)
    #: a snapshot read from the index (no ctimes): its chunks version (``IndexDB.chunks_version``)
    #: then. A sync starts from it only while no other writer has changed the index since, as it
    #: may between a new process's check and its sync. (One a sync took holds ctimes: a file
    #: restored under its old mtime and size has a new ctime.)
    index_version: str | None = None
    #: files whose index rows lag behind what the snapshot saw: appends a sync left for later
    #: (``sync.sessions`` thresholds). The next sync of what moved examines them again, as a full
    #: walk would (it finds their rows behind the files).
    deferred: frozenset[str] = frozenset()

    def delta(self) -> Delta | None:
        """What moved since the snapshot, from one ``stat`` of each of its files and directories
        (100k files in ~0.3 s); None when the snapshot cannot say (it was taken racily, or a file
        that could not be opened now can)."""
        if self.racy or any(is_readable(p) for p in self.unreadable):
            return None
        started = time.monotonic()
        stat = os.stat
        dirs: dict[str, int] = {}
        changed_dirs: list[str] = []
        racy = False
        for path, mtime in self.dirs.items():
            try:
                now = stat(path).st_mtime_ns
            except OSError:
                changed_dirs.append(path)  # gone: its files are gone too, and its parent moved
                continue
            dirs[path] = now
            if now != mtime:
                changed_dirs.append(path)
                racy = racy or is_racy(now, time.time_ns())
        changed: list[str] = []
        vanished: list[str] = []
        # One clock reading for all (100k calls cost a tenth of the loop): taken before any stat, it
        # makes a file look seen earlier than it was, so more files count as racy, never fewer.
        when = time.time_ns()
        for path, mtime, size, ctime in self.files:
            try:
                st = stat(path)
            except OSError:
                vanished.append(path)
                continue
            now_mtime = st.st_mtime_ns
            if now_mtime != mtime or st.st_size != size or (ctime is not None and ctime != st.st_ctime_ns):
                changed.append(path)
            elif when - now_mtime < RACY_WINDOW_COARSE_NS and is_racy(now_mtime, when):
                racy = True  # could still change without its mtime moving: as a sync that read it now
        return Delta(changed, vanished, dirs, changed_dirs, racy, when, started)

    def delta_of(self, paths: Iterable[str | os.PathLike[str]], started: float | None = None) -> Delta | None:
        """What moved, from the ``paths`` a trusted watcher reported since the snapshot (every change
        since then among them): one ``stat`` of each reported file the snapshot holds, of each
        reported directory, and of the nearest directory it knows holding each path (an entry
        created, removed or renamed there moved its mtime). A directory that is gone takes its
        files and subdirectories with it (a folder moved out of the tree is one event). None where
        :meth:`delta` must decide: the snapshot cannot say (racy, an unreadable file readable now),
        or a path lies outside every directory it knows (a path named through a link, say).
        ``started``: ``time.monotonic()`` before the paths were collected."""
        if self.racy or any(is_readable(p) for p in self.unreadable):
            return None
        if started is None:
            started = time.monotonic()
        named = [os.fspath(raw) for raw in paths]
        wanted = set(named)
        # One pass over the entries for the few named (a mapping of every path cost 80 ms at 100k files).
        found = [(entry[0], i) for i, entry in enumerate(self.files) if entry[0] in wanted]
        positions = dict(found)
        known_dirs = self.dirs
        dirs = dict(known_dirs)
        changed: list[str] = []
        vanished: set[str] = set()
        changed_dirs: list[str] = []
        looked: set[str] = set()
        racy = False
        when = time.time_ns()

        def nearest(path: str) -> str | None:
            while path not in known_dirs:
                parent = os.path.dirname(path)
                if parent == path:
                    return None
                path = parent
            return path

        def look(directory: str) -> bool:
            nonlocal racy
            if directory in looked:
                return True
            looked.add(directory)
            try:
                now = os.stat(directory).st_mtime_ns
            except OSError:  # gone, with everything under it
                changed_dirs.append(directory)
                dirs.pop(directory, None)
                prefix = directory + os.sep
                for sub in [d for d in dirs if d.startswith(prefix)]:
                    dirs.pop(sub)
                    changed_dirs.append(sub)
                vanished.update(entry[0] for entry in self.files if entry[0].startswith(prefix))
                parent = nearest(os.path.dirname(directory))
                return parent is not None and look(parent)
            dirs[directory] = now
            if now != known_dirs[directory]:
                changed_dirs.append(directory)
                racy = racy or is_racy(now, time.time_ns())
            return True

        for path in named:
            position = positions.get(path)
            if position is not None and path not in vanished:
                _, mtime, size, ctime = self.files[position]
                try:
                    st = os.stat(path)
                except OSError:
                    vanished.add(path)
                else:
                    now_mtime = st.st_mtime_ns
                    if now_mtime != mtime or st.st_size != size or (ctime is not None and ctime != st.st_ctime_ns):
                        changed.append(path)
                    elif when - now_mtime < RACY_WINDOW_COARSE_NS and is_racy(now_mtime, when):
                        racy = True
            if path in known_dirs and not look(path):
                return None
            holder = nearest(os.path.dirname(path))
            if holder is None or not look(holder):
                return None
        changed = [path for path in dict.fromkeys(changed) if path not in vanished]
        # A path twice among the entries (never expected) would keep a stale copy: carried() then filters.
        return Delta(changed, sorted(vanished), dirs, changed_dirs, racy, when, started,
                     positions if len(positions) == len(found) else None)  # fmt: skip


@dataclass(slots=True)
class Delta:
    """The files and directories of a :class:`Snapshot` as they are now (:meth:`Snapshot.delta`)."""

    #: files whose mtime, size or ctime moved
    changed: list[str]
    #: files that are gone
    vanished: list[str]
    #: every directory that still exists -> its mtime now (read before anything lists it)
    dirs: dict[str, int]
    #: directories whose mtime moved (an entry created, removed or renamed inside) or that are gone
    changed_dirs: list[str]
    #: something moved too recently to be trusted: whoever records this state must not trust it either
    racy: bool
    #: ``time.time_ns()`` before the first file was looked at
    seen_at: int
    #: ``time.monotonic()`` before anything was looked at: a sync starting from this delta saw the
    #: files as of then (what changed later is left for the next check)
    started: float
    #: where files it names sit in the snapshot's ``files`` (those :meth:`Snapshot.delta_of` looked up)
    positions: dict[str, int] | None = None

    @property
    def moved(self) -> bool:
        return bool(self.changed or self.vanished or self.changed_dirs)

    def carried(self, base: Snapshot, examined: Iterable[str] = ()) -> list[SnapshotEntry]:
        """The entries of ``base`` (the snapshot this delta was taken from) whose files neither moved
        nor went nor are ``examined`` again: still true now, so the snapshot after a sync of what
        moved holds them as they are (their racy check was this delta's)."""
        moved = {*self.changed, *self.vanished, *examined}
        if not moved:
            return list(base.files)
        positions = self.positions or {}
        if all(path in positions for path in moved):  # a few known places: no pass over every entry
            carried = list(base.files)
            for position in sorted((positions[path] for path in moved), reverse=True):
                del carried[position]
            return carried
        return [entry for entry in base.files if entry[0] not in moved]


def scan_dirs(workspace: Path, config: MemoryConfig) -> tuple[dict[str, int], bool]:
    """Record the mtime of every directory a sync would look into; (dirs, racy).

    Call this *before* listing files: a file created after the listing then moves a recorded mtime.
    """
    dirs: dict[str, int] = {}
    racy = False

    def record(path: Path | str) -> bool:
        nonlocal racy
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return False
        dirs[str(path)] = mtime
        racy = racy or is_racy(mtime, time.time_ns())
        return True

    def nearest_existing(path: Path) -> None:
        for candidate in [path, *path.parents]:
            if record(candidate):
                return

    seen_real: set[str] = set()
    workspace_real = os.path.realpath(workspace)

    def walk(directory: str, skip_hidden: bool) -> None:
        real = os.path.realpath(directory)
        if real in seen_real:  # link loops, or two roots sharing a directory
            return
        seen_real.add(real)
        if not record(directory):
            return
        try:
            with os.scandir(directory) as entries:
                subdirs = [
                    e
                    for e in entries
                    if e.is_dir(follow_symlinks=True)
                    and e.name not in IGNORED_SEGMENTS
                    and not (skip_hidden and e.name.startswith("."))
                ]
        except OSError:
            return
        for sub in subdirs:
            if sub.is_symlink():
                # Follow links only where discovery could (inside the workspace): a link to "/" must
                # not turn every search into a walk of the whole disk.
                target = os.path.realpath(sub.path)
                if not (target == workspace_real or target.startswith(workspace_real + os.sep)):
                    continue
            walk(sub.path, skip_hidden)

    for root in watch_roots(workspace, config):
        if root.is_file:
            nearest_existing(root.path.parent)
        elif root.path.is_dir():
            walk(str(root.path), skip_hidden=root.kind == "memory")
        else:
            nearest_existing(root.path.parent)
    return dirs, racy


def make_snapshot(
    dirs: dict[str, int],
    dirs_racy: bool,
    observed: Mapping[str, Observed],
    carried: Sequence[SnapshotEntry] = (),
    deferred: Iterable[str] = (),
) -> Snapshot:
    """Build a snapshot from recorded directories, files observed as ``path -> Observed``, and
    ``carried`` entries of an earlier snapshot known unchanged (:meth:`Delta.carried`; whether they
    were racy is in ``dirs_racy``, from the same delta); ``deferred``: :attr:`Snapshot.deferred`."""
    # The subtraction first: at 100k files, calling is_racy on every file cost more than the rest.
    racy = dirs_racy or any(o[2] - o[0] < RACY_WINDOW_COARSE_NS and is_racy(o[0], o[2]) for o in observed.values())
    files = [*carried, *[(p, o[0], o[1], o[3] if len(o) > 3 else None) for p, o in observed.items()]]
    return Snapshot(files=files, dirs=dirs, racy=racy, deferred=frozenset(deferred))


#: Meta key of the directory mtimes of the last complete sync.
DIRS_KEY = "freshness_dirs"


def dirs_record(workspace: Path, dirs: Mapping[str, int]) -> str:
    """The stored form of a sync's directory mtimes (:data:`DIRS_KEY`)."""
    return json.dumps({"workspace": str(workspace), "dirs": dict(dirs)}, separators=(",", ":"))


def stored_snapshot(
    workspace: Path,
    record: str | None,
    files: list[SnapshotEntry],
    unreadable: list[str],
    index_version: str | None = None,
) -> Snapshot | None:
    """The snapshot of the last complete sync, from the index: its directory ``record``, the
    ``(path, mtime_ns, size, None)`` of every indexed or skipped file and the skipped files that
    could not be opened (absolute paths: the workspace, a separator and the stored relative path).
    None when there is no usable record."""
    if not record:
        return None
    try:
        data = json.loads(record)
        dirs = {str(k): int(v) for k, v in data["dirs"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if data.get("workspace") != str(workspace) or not dirs:
        return None
    # extraPaths outside the workspace are stored as ../... and a host's logs by their absolute path
    # (the workspace, a separator and "/..." here): resolve those few; the rest as they are.
    absolute = str(workspace) + "//"

    def resolved(path: str) -> str:
        return path[len(absolute) - 1 :] if path.startswith(absolute) else os.path.normpath(path)

    files = [(resolved(f[0]), f[1], f[2], None) if "/.." in f[0] or f[0].startswith(absolute) else f for f in files]
    return Snapshot(files=files, dirs=dirs, unreadable=[resolved(p) for p in unreadable], index_version=index_version)


__all__ = ["DIRS_KEY", "Delta", "Observed", "Snapshot", "SnapshotEntry", "dirs_record", "make_snapshot", "scan_dirs", "stored_snapshot"]
