"""What each line of an indexed file costs a reader and who spoke it, read from the file itself.

The budget (search/budget.py) counts what a citation really covers: a Markdown line's characters, a
transcript line's message content. Who spoke a line (search/speaker.py) is read here too: a piece
of a long reply split over several chunks does not start with its speaker, the file's line does.
Cached per file by (mtime, size), and a file that grew by appends (a transcript) is parsed only from
where it grew (sources/appends.py); only the files the index already holds are asked for. A file
nobody asked about for ``search.lru.IDLE_S`` is dropped: a renamed or deleted file's path is never
asked for again, and a long-lived server under churn (issue 28's soak) otherwise kept them all up to
the count.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdrecall.search import lru
from mdrecall.search.speaker import Speaker, line_name, markdown_speaker, name_counts
from mdrecall.sources.appends import Kept, resume
from mdrecall.sources.workspace import read_inside

#: (path, source) -> the length of each line as a reader of the citation gets it (a Markdown line's
#: characters; a transcript line's message content), or None when the file cannot be read.
LineLengths = Callable[[str, str], "Sequence[int] | None"]


#: A cached file: ((mtime, size), its lines, when last asked for, the complete lines they cover, the
#: token of :func:`files_unchanged` they were last checked under).
_Entry = tuple[tuple[int, int], "FileLines", float, Kept, object | None]

#: The largest file a sync's read is kept for (``FileLineLengths.prime``): a note, not a long transcript.
PRIME_MAX_BYTES = 256 * 1024


class FileLineLengths:
    """Line lengths of indexed files, read from the workspace and cached by (mtime, size).

    Only the files the index already holds are asked for (a hit's path): relative paths inside the
    workspace, or the absolute paths of configured extra folders.
    """

    def __init__(self, workspace: Path, max_files: int = 4096, max_lines: int = 1_000_000, idle_s: float | None = None) -> None:
        self.root = workspace.resolve()
        self._root = str(self.root)
        #: path -> its entry, least recently asked first.
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._idle_s = idle_s
        self._lock = threading.Lock()
        # Every search asks about each candidate's file, several times: a workspace's files should
        # all fit (a search over 1k files re-read them when 256 did), bounded by the lines held.
        self._max = max_files
        self._max_lines = max_lines
        self._held_lines = 0

    def __call__(self, path: str, source: str) -> list[int] | None:
        found = self._lines(path)
        return found.lengths if found is not None else None

    def speakers(self, path: str, source: str) -> list[Speaker | None] | None:
        """Who spoke each line of the file (search/speaker.py), None when it cannot be read."""
        found = self._lines(path)
        return found.speakers if found is not None else None

    def names(self, path: str, source: str) -> FileLines | None:
        """Whom each line of the file names as its speaker, and the file's people (search/speaker.py)."""
        return self._lines(path)

    def _lines(self, path: str) -> FileLines | None:
        token = _UNCHANGED.get()
        if token is not None:
            with self._lock:
                cached = self._cache.get(path)
                if cached is not None and cached[4] == token:  # checked since the last change seen
                    self._cache[path] = (cached[0], cached[1], lru._now(), cached[3], token)
                    self._cache.move_to_end(path)
                    return cached[1]
        full = os.path.join(self._root, path)  # an absolute path (an extra folder) stays itself
        with self._lock:
            cached = self._cache.get(path)
        if cached is not None:  # else no stat first: the read below fstats what it opened
            try:
                st = os.stat(full)
            except (OSError, ValueError):
                return None
            stamp = (st.st_mtime_ns, st.st_size)
            with self._lock:
                cached = self._cache.get(path)
                if cached is not None and cached[0] == stamp:
                    # Read (and checked to be inside the workspace) before, unchanged since: a link
                    # swapped to point outside would have to keep the same mtime and size, and even
                    # then only what was read from inside is returned.
                    self._cache[path] = (stamp, cached[1], lru._now(), cached[3], token)
                    self._cache.move_to_end(path)
                    return cached[1]
        # Checked inside the workspace on the descriptor read (an extra folder's absolute path was
        # allowed by the index); the stamp kept is the file read's own.
        opened = read_inside(full, None if os.path.isabs(path) else self._root)
        if opened is None:
            return None
        stamp, raw = (opened[0].st_mtime_ns, opened[0].st_size), opened[1]
        return self._keep(path, stamp, raw, cached, token)

    def prime(self, path: str, stamp: tuple[int, int], raw: bytes) -> None:
        """Keep the lines of ``raw``, the bytes a sync just read of the indexed ``path`` under
        ``stamp`` (``SyncContext.on_read``), as a search's first read of it would: the next search
        that cites the file checks its stamp instead of reading and parsing it again. Only while
        the cache has room, and up to a quarter of its lines: a first index of a large tree pushes
        out nothing searches use, nor fills the cache with lines no search asked for (large files,
        long transcripts, are left to the search that needs them)."""
        if len(raw) > PRIME_MAX_BYTES:
            return
        with self._lock:
            cached = self._cache.get(path)
            if cached is None and (len(self._cache) >= self._max or self._held_lines >= self._max_lines // 4):
                return
        self._keep(path, stamp, raw, None, None)

    def _keep(self, path: str, stamp: tuple[int, int], raw: bytes, cached: _Entry | None, token: object | None) -> FileLines:
        # A file that grew by appends (a transcript, a daily note) is parsed from where it grew.
        at = resume(raw, cached[3] if cached is not None else None)
        found: FileLines = FileLines([], [], [])
        if at.start and cached is not None:
            lines = at.first_line - 1
            found = FileLines(cached[1].lengths[:lines], cached[1].speakers[:lines], cached[1].names[:lines])
        text = raw[at.start :].decode("utf-8", errors="replace")
        jsonl = path.endswith(".jsonl")
        for line in text.replace("\r\n", "\n").split("\n"):
            length, speaker, name = _read_line(line, jsonl)
            found.lengths.append(length)
            found.speakers.append(speaker)
            found.names.append(name)
        found.people = name_counts(found.names)
        with self._lock:
            previous = self._cache.pop(path, None)
            if previous is not None:
                self._held_lines -= len(previous[1].lengths)
            now = lru._now()
            self._cache[path] = (stamp, found, now, at.kept, token)
            self._held_lines += len(found.lengths)
            idle_s = self._idle_s if self._idle_s is not None else lru.IDLE_S
            while len(self._cache) > 1 and (
                len(self._cache) > self._max
                or self._held_lines > self._max_lines
                or now - next(iter(self._cache.values()))[2] > idle_s
            ):
                _, (_, dropped, _, _, _) = self._cache.popitem(last=False)
                self._held_lines -= len(dropped.lengths)
        return found


@dataclass(slots=True)
class FileLines:
    """Per line of a file: its length as a reader of a citation gets it, and who spoke it."""

    lengths: list[int]
    speakers: list[Speaker | None]
    #: The person each line names as its speaker ("- [D1:3] Caroline: …"), case-folded.
    names: list[str | None]
    #: How many lines each name labels: who speaks in this file.
    people: dict[str, int] = field(default_factory=dict)


def _read_line(line: str, jsonl: bool) -> tuple[int, Speaker | None, str | None]:
    if not jsonl:
        return len(line), markdown_speaker(line), line_name(line)
    try:
        record = json.loads(line)
    except ValueError:
        return len(line), None, None
    if isinstance(record, dict):
        inner = record.get("message")
        message: dict[str, Any] = inner if isinstance(inner, dict) else record
        role = message.get("role")
        speaker: Speaker | None = role if role in ("user", "assistant") else None
        content = message.get("content", "")
        if isinstance(content, str):
            return len(content), speaker, line_name(content)
        return len(json.dumps(content)), speaker, None
    return len(line), None, None


#: What the files are known to be for the search running in this context: a token its manager's
#: trusted watcher gives (``FreshnessMonitor.unchanged_token``) while it has seen no change, or None.
_UNCHANGED: ContextVar[object | None] = ContextVar("mdrecall_files_unchanged", default=None)


@contextmanager
def files_unchanged(token: object | None) -> Iterator[None]:
    """Within this block a file checked under the same ``token`` before is taken as unchanged
    without a ``stat`` (a search's freshness check trusts the same watcher to skip its own). Each
    ``stat`` also lets another thread take the interpreter, such as the query embedding's, at its
    start or end, which the search then waits for."""
    reset = _UNCHANGED.set(token)
    try:
        yield
    finally:
        _UNCHANGED.reset(reset)


_SHARED: dict[Path, FileLineLengths] = {}
_SHARED_LOCK = threading.Lock()


def lengths_for(workspace: Path) -> FileLineLengths:
    """One cache per workspace, shared by every manager of it in this process."""
    with _SHARED_LOCK:
        found = _SHARED.get(workspace)
        if found is None:
            found = _SHARED[workspace] = FileLineLengths(workspace)
        return found




__all__ = ["FileLineLengths", "FileLines", "LineLengths", "files_unchanged", "lengths_for"]
