"""Reading a file that grows by appends (a transcript) again without parsing what was parsed before.

A reader that parses a file line by line keeps, beside what it made of the file, a :class:`Kept`:
how many bytes (through the last newline) and lines that covered, and their digest. Read again,
:func:`resume` checks that the file still starts with those bytes (a digest of them, not a copy)
and says where parsing must start: after them, or at the top when anything before them changed
(a rewrite, a truncation). Lines end at ``\\n`` only, as transcripts are read everywhere
(sources/transcripts.py), and a last line without one is parsed again next time: it may not be
finished.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Kept:
    """What an earlier parse of a file covered: its complete lines."""

    #: Bytes through the last newline.
    size: int
    #: Newlines in them: the lines fully parsed, numbered 1..lines.
    lines: int
    #: SHA-256 of those bytes.
    digest: bytes


@dataclass(frozen=True, slots=True)
class Resume:
    """Where to parse a file read again."""

    #: The first byte to parse (0: all of it).
    start: int
    #: The 1-based line number of the line starting at ``start``.
    first_line: int
    #: What this parse will cover, to keep for the next.
    kept: Kept


def resume(raw: bytes, kept: Kept | None) -> Resume:
    """Where to start parsing ``raw`` given what an earlier parse covered (None: nothing)."""
    complete = raw.rfind(b"\n") + 1
    view = memoryview(raw)
    if kept is not None and kept.size <= complete:
        digest = hashlib.sha256(view[: kept.size])
        if digest.digest() == kept.digest:
            digest.update(view[kept.size : complete])
            lines = kept.lines + raw.count(b"\n", kept.size, complete)
            return Resume(kept.size, kept.lines + 1, Kept(complete, lines, digest.digest()))
    return Resume(0, 1, Kept(complete, raw.count(b"\n", 0, complete), hashlib.sha256(view[:complete]).digest()))


__all__ = ["Kept", "Resume", "resume"]
