"""Paged, read-only views of what a backend indexed, for the Browse page: files, chunk boundaries,
skipped files.

The builtin engine's index is read through its own read connection (``manager.index.reading()``,
the lock searches take) with LIMIT/OFFSET queries, so a page costs about the same at ten files and at
100k. The contract has no file listing, so for other backends the page lists the files on disk the way
discovery finds them and shows no chunk boundaries (``chunks()`` answers None).

This reads the builtin schema (``files``, ``chunks``, ``skipped_files`` in :mod:`mdrecall.store.db`)
from a shell on purpose: it is the one place that does, and a second shell needing the same would be the
time to move these queries into the store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from mdrecall.sources.transcripts import list_transcripts
from mdrecall.sources.workspace import discover_memory_files, note_date
from mdrecall.types import Status

if TYPE_CHECKING:
    from mdrecall.builtin.manager import BuiltinMemoryManager
    from mdrecall.contract import MemorySearchManager

T = TypeVar("T")
Kind = Literal["all", "dated", "evergreen", "sessions"]
KINDS: tuple[Kind, ...] = ("all", "dated", "evergreen", "sessions")
#: Chunks listed for one page of a file at most (a page shows a few hundred lines).
MAX_CHUNKS = 500


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))

    @property
    def has_prev(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def first(self) -> int:
        return (self.page - 1) * self.per_page + 1 if self.items else 0

    @property
    def last(self) -> int:
        return (self.page - 1) * self.per_page + len(self.items)


def clamp_page(page: int, total: int, per_page: int) -> int:
    """``page`` within 1..the last page (a page past the end shows the last one)."""
    return max(1, min(page, math.ceil(total / per_page) if total else 1))


def page_of(items: Sequence[T], page: int, per_page: int) -> Page[T]:
    page = clamp_page(page, len(items), per_page)
    start = (page - 1) * per_page
    return Page(list(items[start : start + per_page]), len(items), page, per_page)


def kind_of(path: str, source: str) -> str:
    """``transcript``, ``dated 2026-03-02`` or ``evergreen``: how search treats the file (decay)."""
    if source == "sessions":
        return "transcript"
    day = note_date(path)
    return f"dated {day.isoformat()}" if day else "evergreen"


@dataclass(frozen=True, slots=True)
class FileEntry:
    path: str
    source: str
    size: int | None
    chunks: int | None
    indexed_at: str | None

    @property
    def kind(self) -> str:
        return kind_of(self.path, self.source)


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    start_line: int
    end_line: int
    chars: int
    embedded: bool


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """What the index holds for one path."""

    indexed: bool
    source: str | None = None
    size: int | None = None
    indexed_at: str | None = None
    chunks: int = 0
    skipped: str | None = None  # the reason, when the index skipped the file


@dataclass(frozen=True, slots=True)
class SkippedEntry:
    path: str
    source: str
    reason: str
    size: int | None = None


class IndexView(Protocol):
    #: "index" when the listing comes from the index, "disk" when from discovery.
    origin: str

    def files(self, text: str, kind: Kind, page: int, per_page: int) -> Page[FileEntry]: ...

    def file(self, path: str) -> IndexedFile | None: ...

    def chunks(self, path: str, first_line: int, last_line: int) -> list[ChunkSpan] | None: ...

    def skipped(self, page: int, per_page: int) -> Page[SkippedEntry]: ...


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _iso(seconds: int | None) -> str | None:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds") if seconds else None


def _count(conn: Any, sql: str, args: Sequence[object]) -> int:
    row = conn.execute(sql, args).fetchone()
    return int(row[0]) if row else 0


def _is_dated(path: str) -> bool:
    return note_date(path) is not None


class BuiltinIndexView:
    origin = "index"

    def __init__(self, manager: BuiltinMemoryManager) -> None:
        self.manager = manager

    def files(self, text: str, kind: Kind, page: int, per_page: int) -> Page[FileEntry]:
        page = max(1, page)
        where = ["path LIKE ? ESCAPE '\\'"]
        args: list[object] = [_like(text.strip())]
        if kind == "sessions":
            where.append("source = 'sessions'")
        elif kind in ("dated", "evergreen"):
            where.append("source = 'memory'")
        clause = " AND ".join(where)
        with self.manager.index.reading() as db:
            conn = db.conn
            if kind in ("dated", "evergreen"):
                # Dated or not is a property of the name (sources.workspace.note_date), not a column:
                # filter the paths (strings only) here, then load the rows of one page.
                paths = [r[0] for r in conn.execute(f"SELECT path FROM files WHERE {clause} ORDER BY path", args)]
                wanted = [p for p in paths if _is_dated(p) == (kind == "dated")]
                page = clamp_page(page, len(wanted), per_page)
                chosen = wanted[(page - 1) * per_page : page * per_page]
                total = len(wanted)
                marks = ",".join("?" * len(chosen))
                rows = list(conn.execute(
                    "SELECT path, source, size, indexed_at, (SELECT COUNT(*) FROM chunks c WHERE c.path = f.path) "
                    f"FROM files f WHERE path IN ({marks}) ORDER BY path", chosen)) if chosen else []
            else:
                total = _count(conn, f"SELECT COUNT(*) FROM files WHERE {clause}", args)
                page = clamp_page(page, total, per_page)
                rows = list(conn.execute(
                    "SELECT path, source, size, indexed_at, (SELECT COUNT(*) FROM chunks c WHERE c.path = f.path) "
                    f"FROM files f WHERE {clause} ORDER BY path LIMIT ? OFFSET ?", [*args, per_page, (page - 1) * per_page]))
        items = [FileEntry(r[0], r[1], r[2], r[4], _iso(r[3])) for r in rows]
        return Page(items, total, page, per_page)

    def file(self, path: str) -> IndexedFile | None:
        with self.manager.index.reading() as db:
            conn = db.conn
            row = conn.execute("SELECT source, size, indexed_at FROM files WHERE path = ?", (path,)).fetchone()
            if row is not None:
                count = _count(conn, "SELECT COUNT(*) FROM chunks WHERE path = ?", (path,))
                return IndexedFile(True, row[0], row[1], _iso(row[2]), count)
            skipped = conn.execute("SELECT source, size, reason FROM skipped_files WHERE path = ?", (path,)).fetchone()
        if skipped is not None:
            return IndexedFile(False, skipped[0], skipped[1], skipped=skipped[2])
        return IndexedFile(False)

    def chunks(self, path: str, first_line: int, last_line: int) -> list[ChunkSpan] | None:
        with self.manager.index.reading() as db:
            spans = db.chunk_spans(path, first_line, last_line, MAX_CHUNKS)
        return [ChunkSpan(*span) for span in spans]

    def skipped(self, page: int, per_page: int) -> Page[SkippedEntry]:
        page = max(1, page)
        with self.manager.index.reading() as db:
            total = _count(db.conn, "SELECT COUNT(*) FROM skipped_files", ())
            page = clamp_page(page, total, per_page)
            rows = list(db.conn.execute(
                "SELECT path, source, reason, size FROM skipped_files ORDER BY path LIMIT ? OFFSET ?",
                (per_page, (page - 1) * per_page)))
        return Page([SkippedEntry(r[0], r[1], r[2], r[3]) for r in rows], total, page, per_page)


class DiskView:
    """Any other backend: the files discovery finds, and ``status().skipped``."""

    origin = "disk"

    def __init__(self, manager: MemorySearchManager) -> None:
        self.manager = manager

    def _all(self) -> list[FileEntry]:
        workspace = Path(self.manager.workspace)
        config = self.manager.config
        out = [FileEntry(f.rel_path, "memory", _size(f.abspath), None, None) for f in discover_memory_files(workspace, config)]
        if "sessions" in config.sources:
            for _key, path in list_transcripts(workspace, config.sessions.dir):
                out.append(FileEntry(path.relative_to(workspace).as_posix() if path.is_relative_to(workspace) else str(path),
                                     "sessions", _size(str(path)), None, None))
        return sorted(out, key=lambda f: f.path)

    def files(self, text: str, kind: Kind, page: int, per_page: int) -> Page[FileEntry]:
        needle = text.strip().lower()
        items = [
            f for f in self._all()
            if needle in f.path.lower()
            and (kind == "all" or (kind == "sessions") == (f.source == "sessions")
                 and (kind == "sessions" or _is_dated(f.path) == (kind == "dated")))
        ]
        return page_of(items, page, per_page)

    def file(self, path: str) -> IndexedFile | None:
        return None

    def chunks(self, path: str, first_line: int, last_line: int) -> list[ChunkSpan] | None:
        return None

    def skipped(self, page: int, per_page: int) -> Page[SkippedEntry]:
        status: Status = self.manager.status()
        return page_of([SkippedEntry(s.path, s.source, s.reason) for s in status.skipped], page, per_page)


def _size(path: str) -> int | None:
    try:
        return Path(path).stat().st_size
    except OSError:
        return None


def index_view(manager: MemorySearchManager) -> IndexView:
    from mdrecall.builtin.manager import BuiltinMemoryManager

    if isinstance(manager, BuiltinMemoryManager):
        return BuiltinIndexView(manager)
    return DiskView(manager)
