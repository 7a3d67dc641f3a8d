"""Explicit supersession markup in Markdown notes: ``<!-- supersedes: memory/2026-03-02.md#L6 -->``.

The comment names what the statement it belongs to replaces: a line (``path#L6``), a range
(``path#L6-L8``) or a whole file (``path``); several targets are separated by commas. It belongs
to the line it is on when that line says something besides the comment, else to the next
non-blank line (a comment on its own line above the new statement). Paths are as search cites
them (workspace-relative).

Parsed at search time from the indexed chunk text (comments are indexed like any text), so no
column of the index holds it: the builtin engine finds every chunk with markup through its keyword
index (:meth:`~mdrecall.search.corpus.IndexCorpus.marked_chunks`), other engines from their
candidates only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from mdrecall.types import format_citation

_MARK = re.compile(r"<!--\s*supersedes\s*:\s*(.*?)\s*-->", re.IGNORECASE | re.DOTALL)
_TARGET = re.compile(r"^(?P<path>[^#\s]+?)(?:#L(?P<start>\d+)(?:-L?(?P<end>\d+))?)?$")
#: The word the keyword index is asked for (every chunk with markup holds it).
KEYWORD = "supersedes"

#: (rowid, path, source, start line, end line, text) of one indexed chunk.
ChunkRow = tuple[int, str, str, int, int, str]


@dataclass(frozen=True, slots=True)
class Mark:
    """One ``supersedes`` comment: the statement it belongs to and what that statement replaces."""

    path: str
    line: int
    #: The statement's line as indexed (comment included).
    text: str
    #: The indexed chunk holding the statement line (None: the line is past the chunk's end).
    rowid: int | None
    source: str
    target: str
    #: The replaced lines, first and last; None: the whole file.
    lines: tuple[int, int] | None

    @property
    def citation(self) -> str:
        return format_citation(self.path, self.line, self.line)

    def covers(self, path: str, lo: int, hi: int) -> bool:
        """Does this mark replace the statement on lines ``lo..hi`` of ``path``?"""
        if path != self.target or (path == self.path and lo <= self.line <= hi):
            return False
        return self.lines is None or (lo <= self.lines[1] and self.lines[0] <= hi)


@runtime_checkable
class MarkupSource(Protocol):
    """A corpus that knows every mark of its chunks (not only those of one search's candidates)."""

    def marks(self) -> list[Mark]:
        """``collect`` of every chunk holding markup."""
        ...


def _targets(spec: str) -> list[tuple[str, tuple[int, int] | None]]:
    out: list[tuple[str, tuple[int, int] | None]] = []
    for raw in re.split(r"[,\s]+", spec.strip()):
        match = _TARGET.match(raw)
        if not match:
            continue
        path = match.group("path")
        while path.startswith("./"):
            path = path[2:]
        if not path or path.startswith("/") or ".." in path.split("/"):
            continue  # only workspace-relative paths, as search cites them
        start = match.group("start")
        if start is None:
            out.append((path, None))
            continue
        lo, hi = int(start), int(match.group("end") or start)
        if 1 <= lo <= hi:
            out.append((path, (lo, hi)))
    return out


def parse_marks(row: ChunkRow) -> list[Mark]:
    """Every ``supersedes`` comment in one Markdown chunk, one Mark per target."""
    rowid, path, source, start_line, end_line, text = row
    if source != "memory" or "supersedes" not in text.lower():
        return []
    lines = text.split("\n")
    contiguous = len(lines) == end_line - start_line + 1
    out: list[Mark] = []
    for i, line in enumerate(lines):
        found = list(_MARK.finditer(line))
        if not found:
            continue
        rest = _MARK.sub("", line).strip(" \t-*+>")
        j = i
        if not rest:  # the comment on its own line: it belongs to the next statement
            j = next((k for k in range(i + 1, len(lines)) if lines[k].strip()), len(lines))
        if j < len(lines):
            number = start_line + j if contiguous else start_line
            statement, owner = lines[j], rowid
        else:
            number, statement, owner = (start_line + i + 1 if contiguous else end_line + 1), "", None
        for match in found:
            for target, span in _targets(match.group(1)):
                out.append(Mark(path, number, statement, owner, source, target, span))
    return out


def collect(rows: Iterable[ChunkRow]) -> list[Mark]:
    """The marks of ``rows``, each once (overlapping chunks repeat lines)."""
    seen: dict[tuple[str, int, str, tuple[int, int] | None], Mark] = {}
    for row in rows:
        for mark in parse_marks(row):
            key = (mark.path, mark.line, mark.target, mark.lines)
            if key not in seen or (seen[key].rowid is None and mark.rowid is not None):
                seen[key] = mark
    return list(seen.values())


__all__ = ["KEYWORD", "ChunkRow", "Mark", "MarkupSource", "collect", "parse_marks"]
