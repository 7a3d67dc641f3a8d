"""Line-aligned chunks with a token budget and overlap.

Every chunk covers whole source lines (1-based, inclusive ``start_line``..``end_line``); only a single
line longer than the budget is split, and its pieces keep that line's number. Overlap carries whole
trailing lines of the previous chunk. Budgets are in estimated word pieces (``text.estimate_tokens``);
``fit_to_model`` then checks each chunk with the embedding model's own tokenizer and splits any that
would be truncated, so no indexed text is invisible to vector search.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mdrecall.text import estimate_tokens


@dataclass(frozen=True, slots=True)
class Chunk:
    start_line: int
    end_line: int
    text: str
    #: The source line of each line of ``text``; None when they are ``start_line..end_line`` in
    #: order. Transcripts need it: a rendered message spans several text lines (wrapped segments,
    #: pieces of a split segment), and which message a line belongs to cannot be told from the
    #: text once a chunk starts mid-message. Not part of the chunk's identity (``hash``).
    numbers: tuple[int, ...] | None = field(default=None, compare=False)

    def line_numbers(self) -> list[int]:
        """The source line of each line of ``text``."""
        if self.numbers is not None:
            return list(self.numbers)
        return _spread(self.start_line, self.end_line, self.text.count("\n") + 1)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def chunk_id(source: str, path: str, chunk: Chunk) -> str:
    raw = f"{source}:{path}:{chunk.start_line}:{chunk.end_line}:{chunk.hash}"
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _split_long_line(line: str, budget: int) -> list[str]:
    """Split one over-budget line into pieces of at most ``budget`` estimated tokens, at spaces when possible."""
    pieces: list[str] = []
    rest = line
    while rest and estimate_tokens(rest) > budget:
        # Binary search the longest prefix within budget.
        lo, hi = 1, len(rest)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if estimate_tokens(rest[:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        cut = lo
        space = rest.rfind(" ", 0, cut)
        if space > cut // 2:
            cut = space + 1
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def chunk_lines(lines: Sequence[str], tokens: int, overlap: int, line_numbers: Sequence[int] | None = None) -> list[Chunk]:
    """Chunk pre-split lines. ``line_numbers[i]`` is the source line of ``lines[i]`` (default i+1)."""
    segments: list[tuple[int, str, int]] = []  # (line number, text, estimated tokens incl. newline)
    for index, line in enumerate(lines):
        number = line_numbers[index] if line_numbers is not None else index + 1
        cost = estimate_tokens(line)
        if cost + 1 <= tokens:
            segments.append((number, line, cost + 1))
        else:
            for piece in _split_long_line(line, max(1, tokens - 1)):
                segments.append((number, piece, estimate_tokens(piece) + 1))

    chunks: list[Chunk] = []
    buffer: list[tuple[int, str, int]] = []
    used = 0

    def flush() -> None:
        text = "\n".join(seg[1] for seg in buffer)
        if text.strip():
            numbers = tuple(seg[0] for seg in buffer)
            chunks.append(Chunk(buffer[0][0], buffer[-1][0], text, _unless_identity(numbers)))

    for seg in segments:
        if buffer and used + seg[2] > tokens:
            flush()
            carried: list[tuple[int, str, int]] = []
            carried_cost = 0
            if overlap > 0:
                for prev in reversed(buffer):
                    # Never carry so much that the new segment cannot fit beside it.
                    if carried_cost >= overlap or carried_cost + prev[2] + seg[2] > tokens:
                        break
                    carried.insert(0, prev)
                    carried_cost += prev[2]
            buffer, used = carried, carried_cost
        buffer.append(seg)
        used += seg[2]
    if buffer:
        flush()
    return _drop_contained(chunks)


def _drop_contained(chunks: list[Chunk]) -> list[Chunk]:
    # An overlap-only tail can produce a chunk whose lines all sit inside the previous one.
    out: list[Chunk] = []
    for chunk in chunks:
        if out and chunk.text in out[-1].text and chunk.start_line >= out[-1].start_line and chunk.end_line <= out[-1].end_line:
            continue
        out.append(chunk)
    return out


def chunk_markdown(content: str, tokens: int, overlap: int) -> list[Chunk]:
    # splitlines() would also split on \x0b, \x1c and friends, shifting line numbers against editors.
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return chunk_lines(lines, tokens, overlap)


_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")


def heading_trails(content: str, chunks: Sequence[Chunk]) -> list[str]:
    """For each chunk, the Markdown headings in force at its first line that the chunk itself lacks
    (e.g. "# 2023-05-08 > ## Session 3"). Indexed beside the chunk so a chunk from the middle of a
    section still matches the section's date, title or topic."""
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    stack: list[tuple[int, str]] = []
    trail_at: list[str] = []
    for line in lines:
        match = _HEADING.match(line)
        if match:
            level = len(match.group(1))
            stack = [h for h in stack if h[0] < level]
            stack.append((level, match.group(2)))
        trail_at.append(" > ".join(h[1] for h in stack))
    out = []
    for chunk in chunks:
        index = chunk.start_line - 2  # headings above the first line
        trail = trail_at[index] if 0 <= index < len(trail_at) else ""
        out.append("" if not trail or trail in chunk.text else trail)
    return out


def fit_to_model(chunks: list[Chunk], count_tokens: Callable[[Sequence[str]], list[int]], limit: int) -> list[Chunk]:
    """Split chunks the model would truncate (``count_tokens`` is the model's exact counter)."""
    if not chunks:
        return chunks
    counts = count_tokens([c.text for c in chunks])
    out: list[Chunk] = []
    for chunk, count in zip(chunks, counts):
        if count <= limit:
            out.append(chunk)
            continue
        out.extend(_split_to_fit(chunk, count_tokens, limit))
    return out


def _split_to_fit(chunk: Chunk, count_tokens: Callable[[Sequence[str]], list[int]], limit: int) -> list[Chunk]:
    lines = chunk.text.split("\n")
    if len(lines) > 1:
        numbers = chunk.line_numbers()
        mid = len(lines) // 2
        halves = [
            Chunk(numbers[0], numbers[mid - 1], "\n".join(lines[:mid]), _unless_identity(tuple(numbers[:mid]))),
            Chunk(numbers[mid], numbers[-1], "\n".join(lines[mid:]), _unless_identity(tuple(numbers[mid:]))),
        ]
        return fit_to_model(halves, count_tokens, limit)
    text = chunk.text
    mid = len(text) // 2
    space = text.rfind(" ", 0, mid)
    if space > mid // 2:
        mid = space + 1
    if mid <= 0 or mid >= len(text):
        return [chunk]
    halves = [Chunk(chunk.start_line, chunk.end_line, text[:mid], chunk.numbers),
              Chunk(chunk.start_line, chunk.end_line, text[mid:], chunk.numbers)]
    return fit_to_model(halves, count_tokens, limit)


def _spread(start: int, end: int, count: int) -> list[int]:
    """Line numbers for ``count`` text lines known only by their range (a stored chunk without
    ``numbers``): contiguous when they fit, else clamped to the range."""
    if end - start + 1 == count:
        return list(range(start, end + 1))
    return [min(start + i, end) for i in range(count)]


def _unless_identity(numbers: tuple[int, ...]) -> tuple[int, ...] | None:
    if numbers == tuple(range(numbers[0], numbers[0] + len(numbers))):
        return None
    return numbers


def encode_numbers(numbers: Sequence[int] | None) -> str | None:
    """``numbers`` as stored: runs of ``line*count`` (``"6,7*3"``: line 6, then three lines of 7)."""
    if not numbers:
        return None
    runs: list[str] = []
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[i]:
            j += 1
        runs.append(str(numbers[i]) if j == i else f"{numbers[i]}*{j - i + 1}")
        i = j + 1
    return ",".join(runs)


def decode_numbers(stored: str | None) -> list[int] | None:
    """The inverse of :func:`encode_numbers`; None for nothing stored or anything malformed."""
    if not stored:
        return None
    out: list[int] = []
    try:
        for run in stored.split(","):
            line, _, count = run.partition("*")
            out.extend([int(line)] * (int(count) if count else 1))
    except ValueError:
        return None
    return out
