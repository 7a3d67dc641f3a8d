"""Line-aligned chunks with a token budget and overlap.

Every chunk covers whole source lines (1-based, inclusive ``start_line``..``end_line``); only a single
line longer than the budget is split, and its pieces keep that line's number. Overlap carries whole
trailing lines of the previous chunk. Budgets are in estimated word pieces (``text.estimate_tokens``);
``fit_to_model`` then checks each chunk with the embedding model's own tokenizer and splits any that
would be truncated, so no indexed text is invisible to vector search. :class:`ResumableChunker` gives
the same chunks for a file that grows by appends (a transcript) without packing it all again.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mdrecall.text import SliceCosts, estimate_tokens


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
    #: The text's SHA-256, computed once: a chunk kept across syncs (a transcript's, by
    #: :class:`ResumableChunker`) is hashed for its id, its row and its cache key every time.
    _digest: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_digest", hashlib.sha256(self.text.encode("utf-8")).hexdigest())

    def line_numbers(self) -> list[int]:
        """The source line of each line of ``text``."""
        if self.numbers is not None:
            return list(self.numbers)
        return _spread(self.start_line, self.end_line, self.text.count("\n") + 1)

    @property
    def hash(self) -> str:
        return self._digest


def chunk_id(source: str, path: str, chunk: Chunk) -> str:
    raw = f"{source}:{path}:{chunk.start_line}:{chunk.end_line}:{chunk.hash}"
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _split_long_line(line: str, budget: int) -> list[tuple[str, int]]:
    """Split one over-budget line into pieces of at most ``budget`` estimated tokens, at spaces when
    possible; each piece with its estimate."""
    costs = SliceCosts(line)
    pieces: list[tuple[str, int]] = []
    at, end = 0, len(line)
    while at < end and costs.estimate(at, end) > budget:
        # Binary search the longest prefix of the rest within budget.
        lo, hi = 1, end - at
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if costs.estimate(at, at + mid) <= budget:
                lo = mid
            else:
                hi = mid - 1
        cut = lo
        space = line.rfind(" ", at, at + cut)
        if space - at > cut // 2:
            cut = space - at + 1
        pieces.append((line[at : at + cut], costs.estimate(at, at + cut)))
        at += cut
    if at < end:
        pieces.append((line[at:], costs.estimate(at, end)))
    return pieces


#: One piece of a line as the packer sees it: (source line number, text, estimated tokens incl. newline).
Segment = tuple[int, str, int]


def chunk_lines(lines: Sequence[str], tokens: int, overlap: int, line_numbers: Sequence[int] | None = None) -> list[Chunk]:
    """Chunk pre-split lines. ``line_numbers[i]`` is the source line of ``lines[i]`` (default i+1)."""
    segments, _ = _segments(lines, tokens, line_numbers)
    return _drop_contained([packed.chunk for packed in _pack(segments, tokens, overlap)])


def _segments(lines: Sequence[str], tokens: int, line_numbers: Sequence[int] | None) -> tuple[list[Segment], list[int]]:
    """The lines as segments (an over-budget line split into pieces), and the index of each line's first."""
    segments: list[Segment] = []
    starts: list[int] = []
    for index, line in enumerate(lines):
        starts.append(len(segments))
        number = line_numbers[index] if line_numbers is not None else index + 1
        cost = estimate_tokens(line)
        if cost + 1 <= tokens:
            segments.append((number, line, cost + 1))
        else:
            for piece, piece_cost in _split_long_line(line, max(1, tokens - 1)):
                segments.append((number, piece, piece_cost + 1))
    return segments, starts


@dataclass(frozen=True, slots=True)
class _Packed:
    chunk: Chunk
    #: The index of its first segment (the first carried over, if any).
    first: int
    #: The index of the segment whose arrival closed the chunk before it (``first`` for the first chunk).
    opened: int


def _pack(segments: Sequence[Segment], tokens: int, overlap: int, start: int = 0, opened: int | None = None) -> list[_Packed]:
    """Pack ``segments[start:]`` greedily into chunks of at most ``tokens``, each carrying up to
    ``overlap`` tokens of the previous chunk's last whole segments."""
    packed: list[_Packed] = []
    buffer: list[int] = []
    used = 0
    opening = start if opened is None else opened

    def flush() -> None:
        text = "\n".join(segments[i][1] for i in buffer)
        if text.strip():
            numbers = tuple(segments[i][0] for i in buffer)
            chunk = Chunk(numbers[0], numbers[-1], text, _unless_identity(numbers))
            packed.append(_Packed(chunk, buffer[0], opening))

    for index in range(start, len(segments)):
        cost = segments[index][2]
        if buffer and used + cost > tokens:
            flush()
            carried: list[int] = []
            carried_cost = 0
            if overlap > 0:
                for prev in reversed(buffer):
                    # Never carry so much that the new segment cannot fit beside it.
                    if carried_cost >= overlap or carried_cost + segments[prev][2] + cost > tokens:
                        break
                    carried.insert(0, prev)
                    carried_cost += segments[prev][2]
            buffer, used, opening = carried, carried_cost, index
        buffer.append(index)
        used += cost
    if buffer:
        flush()
    return packed


class ResumableChunker:
    """Chunks of files that grow by appends (transcripts), packing only from where the chunks can change.

    The packing is greedy and carries its overlap from the chunk it closes, so once a chunk has
    been opened (by a segment that did not fit beside the previous one), what follows depends only
    on that chunk's segments and the segments after it. A chunk opened by a segment the new lines
    share with those chunked last time is therefore opened the same way again: the chunks before
    it are kept and packing resumes at its first segment, giving the chunks packing every line
    would (tests/test_chunking.py compares the two on random appends and edits). The lines shared
    with last time are kept as segments too, and what :func:`fit_to_model` made of each chunk, for
    the same model and limit. Kept for the ``max_files`` files chunked last.
    """

    def __init__(self, max_files: int = 16, max_segments: int = 100_000) -> None:
        self.max_files, self.max_segments = max_files, max_segments
        self._kept: dict[str, _Chunked] = {}
        self._lock = threading.Lock()

    def chunk(self, key: str, lines: list[str], line_numbers: list[int] | None, tokens: int, overlap: int,
              fit: tuple[Callable[[Sequence[str]], list[int]], int, str] | None = None) -> list[Chunk]:  # fmt: skip
        """``chunk_lines`` of the lines, then, with ``fit`` = (the model's counter, its limit, a key
        naming the model), ``fit_to_model``."""
        with self._lock:
            kept = self._kept.pop(key, None)
        numbers = list(line_numbers) if line_numbers is not None else list(range(1, len(lines) + 1))
        if kept is not None and kept.tokens == tokens and kept.overlap == overlap:
            shared = _shared_prefix(kept.lines, lines, kept.numbers, numbers)
            tail, tail_starts = _segments(lines[shared:], tokens, numbers[shared:])
            cut = kept.starts[shared] if shared < len(kept.starts) else len(kept.segments)
            segments = kept.segments[:cut] + tail
            starts = kept.starts[:shared] + [cut + i for i in tail_starts]
            # The last chunk opened by a segment both lists share; the first chunk is always safe.
            resume = 0
            for position in range(len(kept.packed) - 1, 0, -1):
                if kept.packed[position].opened < cut:
                    resume = position
                    break
            if resume:
                at = kept.packed[resume]
                packed = kept.packed[:resume] + _pack(segments, tokens, overlap, at.first, at.opened)
            else:
                packed = _pack(segments, tokens, overlap)
        else:
            segments, starts = _segments(lines, tokens, numbers)
            packed = _pack(segments, tokens, overlap)
        chunks = _drop_contained([p.chunk for p in packed])
        fitted: dict[tuple[Chunk, tuple[int, ...] | None], list[Chunk]] = {}
        if fit is not None and chunks:
            count, limit, model = fit
            known = kept.fitted if kept is not None and kept.fit_key == (model, limit) else {}
            missing = [c for c in chunks if (c, c.numbers) not in known]
            made = dict(zip([(c, c.numbers) for c in missing], _fit_each(missing, count, limit)))
            fitted = {(c, c.numbers): known.get((c, c.numbers)) or made[(c, c.numbers)] for c in chunks}
            chunks = [piece for c in chunks for piece in fitted[(c, c.numbers)]]
        if len(segments) <= self.max_segments:
            entry = _Chunked(tokens, overlap, list(lines), numbers, segments, starts, packed,
                             (fit[2], fit[1]) if fit is not None else None, fitted)  # fmt: skip
            with self._lock:
                self._kept[key] = entry
                while len(self._kept) > self.max_files or sum(len(e.segments) for e in self._kept.values()) > self.max_segments:
                    del self._kept[next(iter(self._kept))]
        return chunks

    def forget(self, key: str) -> None:
        with self._lock:
            self._kept.pop(key, None)


@dataclass(slots=True)
class _Chunked:
    """What :class:`ResumableChunker` keeps of one file's last chunking."""

    tokens: int
    overlap: int
    lines: list[str]
    numbers: list[int]
    segments: list[Segment]
    starts: list[int]
    packed: list[_Packed]
    fit_key: tuple[str, int] | None
    fitted: dict[tuple[Chunk, tuple[int, ...] | None], list[Chunk]]


def _shared_prefix(old: list[str], new: list[str], old_numbers: list[int], new_numbers: list[int]) -> int:
    """How many leading lines (text and source line) the two chunkings share."""
    n = min(len(old), len(new))
    if old[:n] == new[:n] and old_numbers[:n] == new_numbers[:n]:  # the usual case, an append: compared in C
        return n
    for i in range(n):
        if old[i] != new[i] or old_numbers[i] != new_numbers[i]:
            return i
    return n


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
    return [piece for pieces in _fit_each(chunks, count_tokens, limit) for piece in pieces]


def _fit_each(chunks: list[Chunk], count_tokens: Callable[[Sequence[str]], list[int]], limit: int) -> list[list[Chunk]]:
    """What :func:`fit_to_model` makes of each chunk."""
    if not chunks:
        return []
    counts = count_tokens([c.text for c in chunks])
    return [[chunk] if count <= limit else _split_to_fit(chunk, count_tokens, limit) for chunk, count in zip(chunks, counts)]


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
