"""What the indexer needs from a source of memory files other than the Markdown tree.

Markdown memory files are discovered by :mod:`mdrecall.sources.workspace` and indexed as they are.
Another source (session transcripts) subclasses :class:`SourceAdapter`: it lists its files, renders
each to the lines that are chunked and cited, and may let a growing file wait before re-indexing.
"""

from __future__ import annotations

from pathlib import Path

from mdrecall.sources.workspace import MemoryFile


class SourceAdapter:
    """A non-Markdown source: discovers its files and renders them to lines."""

    #: The ``source`` value of its rows (``"sessions"``).
    source: str = ""
    #: Replace invalid UTF-8 instead of skipping the file.
    lenient_decode: bool = False

    def discover(self) -> list[MemoryFile]:
        raise NotImplementedError

    def render(self, file: MemoryFile, text: str) -> tuple[list[str], list[int]]:
        """(rendered lines, 1-based source line per rendered line)."""
        raise NotImplementedError

    def defer_growth(self, raw: bytes, indexed_size: int) -> bool:
        """Whether an automatic sync may leave the tail appended after ``indexed_size`` for later."""
        return False

    def deferrable(self, path: Path, indexed_size: int, size: int) -> bool:
        """The same decision from the file on disk (for status), reading as little as possible."""
        return False

    def forget(self, rel_path: str) -> None:
        """Drop anything kept in memory of a file that is no longer indexed (a render kept to resume)."""
