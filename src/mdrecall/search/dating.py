"""When a hit's statement was made: what knowledge updates and "as of" search compare.

* a dated note (``memory/**/YYYY-MM-DD*.md``): its day; only the day is known, so two notes of one
  day are never ordered, nor a note and a message of its day;
* a transcript message: its timestamp (a message without one takes the previous message's);
* a ``MEMORY.md`` line that dreaming promoted (``<!-- mdrecall:promoted ... source=memory/
  2026-03-02.md:14-15 -->``): the day of the note it was promoted from;
* any other line of an undated (evergreen) file: unknown, bounded only by the file's last
  modification (the line existed by then; it may be much older).

A statement is "certainly older" than another when the latest it can have been made is before the
earliest the other can have been made; nothing else orders two statements.

The files are read from the workspace at search time (the index keeps no message times), cached
by modification time and size, the way ``search/budget.py`` reads line lengths.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Literal

from mdrecall.search.budget import Hit, message_map
from mdrecall.sources.appends import Kept, resume
from mdrecall.sources.transcripts import message_times
from mdrecall.sources.workspace import note_date, read_inside, stat_inside

How = Literal["note", "message", "promoted", "dated line", "modified", "unknown"]

#: ``source=memory/2026-03-02.md:14-15`` in dreaming's promotion marker (dreaming/promotion.py).
_PROMOTED_SOURCE = re.compile(r"<!--\s*mdrecall:promoted\b[^>]*?\bsource=(\S+?):\d+(?:-\d+)?[\s>]")
#: An evergreen line that says when it was written: "- 2026-11-05: Drop support for Safari 15."
_DATED_LINE = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?(\d{4})-(\d{2})-(\d{2})(?:\*\*)?\s*[:—–-]")


@dataclass(frozen=True, slots=True)
class Stated:
    """When a statement was made, as an interval (either end None: unknown)."""

    earliest: datetime | None
    latest: datetime | None
    how: How

    def before(self, other: Stated) -> bool:
        """Certainly made before ``other``."""
        return self.latest is not None and other.earliest is not None and self.latest < other.earliest

    def label(self) -> str:
        """For people: the day, the message time, or what bounds it."""
        if self.how in ("note", "promoted", "dated line") and self.earliest is not None:
            return self.earliest.date().isoformat()
        if self.how == "message" and self.earliest is not None:
            return self.earliest.isoformat(timespec="minutes").replace("+00:00", "Z")
        if self.how == "modified" and self.latest is not None:
            return f"undated (file last changed {self.latest.date().isoformat()})"
        return "undated"


UNKNOWN = Stated(None, None, "unknown")


@functools.lru_cache(maxsize=4096)  # a search dates each hit of its head; the days recur
def day_interval(day: date, how: How = "note") -> Stated:
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return Stated(start, start + timedelta(days=1) - timedelta(microseconds=1), how)


def plain_path(path: str) -> str:
    """A team note's ``@agent/memory/...`` path (Postgres backend) without its agent."""
    return path.partition("/")[2] if path.startswith("@") else path


#: Paths whose check that they lie inside the workspace one FileTimes keeps (then it starts again).
_INSIDE_PATHS = 65_536


class FileTimes:
    """Modification times of indexed files and the message times of transcripts, cached by
    (mtime, size); a transcript that grew by appends is parsed only from where it grew
    (sources/appends.py). Only paths the index holds are asked for: relative paths inside the
    workspace, or the absolute paths of configured extra folders."""

    def __init__(self, workspace: Path, max_files: int = 256) -> None:
        self.root = workspace.resolve()
        self._root = str(self.root)
        #: path -> ((mtime, size), message times, the complete lines they cover)
        self._cache: OrderedDict[str, tuple[tuple[int, int], dict[int, int | None], Kept]] = OrderedDict()
        #: Paths found inside the workspace, with the (mtime, size) they had then.
        self._inside: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._max = max_files

    def _checked(self, path: str) -> tuple[str, str | None] | None:
        """The full path of an indexed ``path`` and the folder a read must stay inside (None: an
        extra folder's absolute path, allowed by the index); None for another agent's note."""
        if path.startswith("@"):
            return None  # another agent's note: not a file here
        if os.path.isabs(path):
            return path, None
        return os.path.join(self._root, path), self._root

    def mtime(self, path: str) -> datetime | None:
        checked = self._checked(path)
        if checked is None:
            return None
        with self._lock:
            known = self._inside.get(path)
        if known is not None:
            try:
                st = os.stat(checked[0])
            except (OSError, ValueError):
                return None
            if known == (st.st_mtime_ns, st.st_size):
                # Found inside the workspace before with this mtime and size (supersession asks
                # for each undated hit of its head).
                return datetime.fromtimestamp(st.st_mtime, UTC)
        found = stat_inside(*checked)
        if found is None:
            return None
        with self._lock:
            if len(self._inside) >= _INSIDE_PATHS:
                self._inside.clear()
            self._inside[path] = (found.st_mtime_ns, found.st_size)
        return datetime.fromtimestamp(found.st_mtime, UTC)

    def messages(self, path: str) -> dict[int, int | None] | None:
        """JSONL line -> message time in epoch ms, a message without one taking the previous one's."""
        checked = self._checked(path)
        if checked is None:
            return None
        with self._lock:
            found = self._cache.get(path)
        if found is not None:
            try:
                st = os.stat(checked[0])
            except (OSError, ValueError):
                return None
            with self._lock:
                found = self._cache.get(path)
                if found is not None and found[0] == (st.st_mtime_ns, st.st_size):
                    self._cache.move_to_end(path)
                    return found[1]
        opened = read_inside(*checked)
        if opened is None:
            return None
        stamp, raw = (opened[0].st_mtime_ns, opened[0].st_size), opened[1]
        # A transcript grows by appends: only the lines appended since it was read are parsed.
        at = resume(raw, found[2] if found is not None else None)
        times: dict[int, int | None] = {}
        last: int | None = None
        if at.start and found is not None:
            times = {line: when for line, when in found[1].items() if line < at.first_line}
            last = times[max(times)] if times else None
        appended = message_times(raw[at.start :], at.first_line)
        for line in sorted(appended):
            times[line] = last = appended[line] if appended[line] is not None else last
        with self._lock:
            self._cache[path] = (stamp, times, at.kept)
            if len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return times


_SHARED: dict[Path, FileTimes] = {}
_SHARED_LOCK = threading.Lock()


def times_for(workspace: Path) -> FileTimes:
    """One cache per workspace, shared by every manager of it in this process."""
    with _SHARED_LOCK:
        found = _SHARED.get(workspace)
        if found is None:
            found = _SHARED[workspace] = FileTimes(workspace)
        return found


def focus(hit: Hit) -> tuple[int, int]:
    """The lines (transcripts: messages) of the hit's statement: its best-matching line, else all."""
    weights = hit.line_weights
    top = max(weights) if weights else 0
    if top <= 0:
        return hit.start_line, hit.end_line
    best = weights.index(top)  # the first line of the best weight
    if hit.source == "sessions":
        mapping = hit.line_map or message_map(hit.text, hit.start_line, hit.end_line)
        if mapping is None or len(mapping) != len(weights):
            return hit.start_line, hit.end_line
        return mapping[best], mapping[best]
    if hit.text.count("\n") != hit.end_line - hit.start_line:
        return hit.start_line, hit.end_line  # not one text line per file line (a split long line)
    return hit.start_line + best, hit.start_line + best


def focus_text(hit: Hit) -> str:
    """The text of the hit's statement line(s): for a transcript, its statement message's lines
    (the whole hit when they cannot be told)."""
    lo, hi = focus(hit)
    if hit.source == "sessions":
        mapping = hit.line_map or message_map(hit.text, hit.start_line, hit.end_line)
        if mapping is None or len(mapping) != hit.text.count("\n") + 1:
            return hit.text
        return "\n".join(line for line, n in zip(hit.text.split("\n"), mapping) if lo <= n <= hi)
    if hit.text.count("\n") != hit.end_line - hit.start_line:
        return hit.text
    lines = hit.text.split("\n")
    return "\n".join(lines[lo - hit.start_line : hi - hit.start_line + 1])


def stated(hit: Hit, times: FileTimes | None) -> Stated:
    """When the statement ``hit`` holds was made (see the module docstring)."""
    path = plain_path(hit.path)
    if hit.source == "sessions":
        lo, hi = focus(hit)
        found = times.messages(hit.path) if times is not None else None
        if not found:
            return UNKNOWN
        first, last = found.get(lo), found.get(hi)
        if first is None or last is None:
            return UNKNOWN
        return Stated(datetime.fromtimestamp(first / 1000, UTC), datetime.fromtimestamp(last / 1000, UTC), "message")
    day = note_date(path)
    if day is not None:
        return day_interval(day)
    text = focus_text(hit)
    dated = _DATED_LINE.match(text) if "\n" not in text else None
    if dated is not None:
        try:
            return day_interval(date(int(dated.group(1)), int(dated.group(2)), int(dated.group(3))), "dated line")
        except ValueError:
            pass  # not a real date ("2026-13-40"): dated as the file is
    promoted = _PROMOTED_SOURCE.search(text + " ")
    if promoted:
        source_day = note_date(promoted.group(1))
        if source_day is not None:
            return day_interval(source_day, "promoted")
    modified = times.mtime(hit.path) if times is not None else None
    return Stated(None, modified, "modified") if modified is not None else UNKNOWN


__all__ = ["UNKNOWN", "FileTimes", "Stated", "day_interval", "focus", "focus_text", "plain_path", "stated", "times_for"]
