"""Budget-aware results: cite only the matching part of a long hit, and pack the character budget.

An agent receives results in rank order until ``maxInjectedChars`` is spent. Two faults wasted it:
a hit on one line of a ten-line chunk cited (and injected) all ten lines, and a hit on one segment
of a 3,000-character transcript message cited the whole message, so two such hits filled the
budget before the short turn that held the answer. Here:

* **narrowing**: a Markdown hit longer than ``snippet.narrowAboveChars`` is cut to its best
  matching line (the most query-term weight) and ``snippet.contextLines`` lines either side; a
  transcript hit spanning several messages is cut to its best message and as many neighbours;
* **cost** is what the citation covers in full: the cited lines, or the whole cited messages of a
  transcript (an agent that opens the citation reads them), so the budget counts what a reader of
  the results really receives;
* **packing**: hits are taken in rank order while they fit; one that does not fit is skipped (not
  allowed to end the list), so later, shorter relevant hits still get in. Whatever budget is left
  at the end goes to the best skipped hit, cut to the lines (or characters) that fit, placed last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdrecall.store.db import IndexDB

if TYPE_CHECKING:
    from mdrecall.search.relevance import KeywordEvidence

_PREFIXES = ("User: ", "Assistant: ")
#: transcripts.WRAP_CHARS: a rendered segment this long (less a word's slack) may continue.
_WRAP = 800
_CONTINUES = _WRAP - 60
#: Rendered transcript text drops whitespace runs that the cited JSONL content still holds.
_SESSION_SLACK = 1.08


@dataclass(slots=True)
class Hit:
    rowid: int
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    score: float = 0.0
    logit: float = 0.0
    cosine: float | None = None
    text_score: float | None = None
    keyword_rank: int | None = None
    evidence: "KeywordEvidence | None" = None
    #: Per line of ``text``, the query-term weight it matches (filled from the evidence).
    line_weights: list[float] = field(default_factory=list)
    #: Characters the citation covers (set by narrowing).
    cost: int = 0
    #: Transcript hits: the JSONL line of each line of ``text`` (None: unknown).
    line_map: list[int] | None = None


def _contiguous(hit: Hit) -> bool:
    return hit.source != "sessions" and hit.text.count("\n") == hit.end_line - hit.start_line


def message_map(text: str, start: int, end: int) -> list[int] | None:
    """The JSONL line of each rendered line of a transcript chunk, or None when it cannot be told.

    Rendered lines start with a role prefix; a message longer than the wrap width continues on
    further prefixed segments, and an over-long segment on unprefixed pieces. A segment shorter
    than the wrap width ends its message. The mapping must account for exactly the chunk's
    ``start..end`` messages, or it is not trusted.
    """
    lines = text.split("\n")
    out: list[int] = []
    message = 0
    segment_len = 0
    for i, line in enumerate(lines):
        prefixed = line.startswith(_PREFIXES)
        if i > 0 and prefixed:
            if segment_len < _CONTINUES:
                message += 1
            segment_len = 0
        if prefixed:
            segment_len = len(line.split(": ", 1)[1])
        else:
            segment_len += len(line)
        out.append(start + message)
    if start + message != end:
        return None
    return out


def _content_length(lines: list[str]) -> int:
    total = 0
    for line in lines:
        total += len(line.split(": ", 1)[1]) if line.startswith(_PREFIXES) else len(line)
    return total


def _session_message_lengths(db: IndexDB | None, hit: Hit, messages: range) -> int:
    """Characters of the whole cited messages (the scorer's and a reader's view of the citation)."""
    assert hit.line_map is not None
    lines = hit.text.split("\n")
    total = 0
    for m in messages:
        own = [line for line, n in zip(lines, hit.line_map) if n == m]
        complete = True
        first_line_of_chunk = own and lines[0] == own[0]
        last_line_of_chunk = own and lines[-1] == own[-1]
        if first_line_of_chunk and m == hit.start_line:
            complete = False  # the message may have begun in an earlier chunk
        if last_line_of_chunk and m == hit.end_line and len(own[-1]) >= _CONTINUES:
            complete = False
        if not complete and db is not None:
            own = _whole_message(db, hit.path, m) or own
        total += int(_content_length(own) * _SESSION_SLACK) + 1
    return total


def _whole_message(db: IndexDB, path: str, message: int) -> list[str] | None:
    rows = db.conn.execute(
        "SELECT start_line, end_line, text FROM chunks WHERE path = ? AND source = 'sessions' "
        "AND start_line <= ? AND end_line >= ? ORDER BY start_line, rowid",
        (path, message, message),
    ).fetchall()
    seen: set[str] = set()
    out: list[str] = []
    for start, end, text in rows:
        mapping = message_map(text, start, end)
        if mapping is None:
            if start == end == message:
                mapping = [message] * (text.count("\n") + 1)
            else:
                continue
        for line, n in zip(text.split("\n"), mapping):
            if n == message and line not in seen:
                seen.add(line)
                out.append(line)
    return out or None


def _best_window(weights: list[float], context: int) -> tuple[int, int] | None:
    if not weights or max(weights) <= 0:
        return None
    best = max(range(len(weights)), key=lambda i: (weights[i], -i))
    return max(0, best - context), min(len(weights) - 1, best + context)


def narrow(hit: Hit, context: int, narrow_above: int, db: IndexDB | None) -> Hit:
    """Cut ``hit`` to its best-matching lines (or messages) and set its citation cost."""
    lines = hit.text.split("\n")
    if hit.source == "sessions":
        hit.line_map = message_map(hit.text, hit.start_line, hit.end_line)
        if hit.line_map is None:
            hit.cost = int(len(hit.text) * _SESSION_SLACK) + 1
            return hit
        messages = range(hit.start_line, hit.end_line + 1)
        if len(hit.text) > narrow_above and hit.end_line > hit.start_line and hit.line_weights:
            per_message = [0.0] * len(messages)
            for w, n in zip(hit.line_weights, hit.line_map):
                per_message[n - hit.start_line] = max(per_message[n - hit.start_line], w)
            window = _best_window(per_message, context)
            if window is not None:
                lo, hi = hit.start_line + window[0], hit.start_line + window[1]
                kept = [(line, n) for line, n in zip(lines, hit.line_map) if lo <= n <= hi]
                hit.text = "\n".join(line for line, _ in kept)
                hit.line_weights = [w for w, n in zip(hit.line_weights, hit.line_map) if lo <= n <= hi]
                hit.line_map = [n for _, n in kept]
                hit.start_line, hit.end_line = lo, hi
                messages = range(lo, hi + 1)
        hit.cost = _session_message_lengths(db, hit, messages)
        return hit
    if _contiguous(hit) and len(hit.text) > narrow_above and len(lines) > 1:
        window = _best_window(hit.line_weights, context)
        if window is not None:
            lo, hi = window
            hit.text = "\n".join(lines[lo : hi + 1])
            hit.line_weights = hit.line_weights[lo : hi + 1]
            hit.start_line, hit.end_line = hit.start_line + lo, hit.start_line + hi
    hit.cost = len(hit.text) + 1
    return hit


def _overlaps(a: Hit, b: Hit) -> bool:
    return a.path == b.path and a.source == b.source and a.start_line <= b.end_line and b.start_line <= a.end_line


def _trim_overlap(hit: Hit, kept: list[Hit]) -> Hit | None:
    """Drop the lines of ``hit`` that a better-ranked kept hit already cites; None when nothing is left."""
    for other in kept:
        if not _overlaps(hit, other):
            continue
        if other.start_line <= hit.start_line and hit.end_line <= other.end_line:
            return None
        if not _contiguous(hit):
            return None if hit.source != "sessions" else _trim_session(hit, other)
        lines = hit.text.split("\n")
        numbers = range(hit.start_line, hit.end_line + 1)
        keep = [i for i, n in enumerate(numbers) if not other.start_line <= n <= other.end_line]
        # Overlap is at one end (chunks are contiguous), so what is left is contiguous.
        if not keep:
            return None
        hit.text = "\n".join(lines[keep[0] : keep[-1] + 1])
        hit.line_weights = hit.line_weights[keep[0] : keep[-1] + 1] if hit.line_weights else []
        hit.start_line, hit.end_line = numbers[keep[0]], numbers[keep[-1]]
    return hit


def _trim_session(hit: Hit, other: Hit) -> Hit | None:
    if hit.line_map is None:
        return None
    kept = [(line, n) for line, n in zip(hit.text.split("\n"), hit.line_map) if not other.start_line <= n <= other.end_line]
    if not kept:
        return None
    numbers = sorted({n for _, n in kept})
    if numbers != list(range(numbers[0], numbers[-1] + 1)):
        return None
    hit.text = "\n".join(line for line, _ in kept)
    hit.line_map = [n for _, n in kept]
    hit.start_line, hit.end_line = numbers[0], numbers[-1]
    return hit


def _cut(hit: Hit, remaining: int) -> Hit | None:
    """The whole lines of a Markdown hit that fit ``remaining``; one long first line is cut mid-line."""
    if hit.source == "sessions":
        if hit.line_map is None or hit.start_line == hit.end_line:
            return None
        # Whole messages only: a cited message is charged in full.
        for last in range(hit.end_line - 1, hit.start_line - 1, -1):
            kept = [(line, n) for line, n in zip(hit.text.split("\n"), hit.line_map) if n <= last]
            trial = Hit(hit.rowid, hit.path, hit.source, hit.start_line, last, "\n".join(l for l, _ in kept),
                        hit.score, hit.logit, hit.cosine, hit.text_score, hit.keyword_rank, hit.evidence,
                        line_map=[n for _, n in kept])
            trial.cost = int(_content_length(trial.text.split("\n")) * _SESSION_SLACK) + (last - hit.start_line + 1)
            if trial.cost <= remaining:
                return trial
        return None
    lines = hit.text.split("\n")
    kept: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > remaining:
            break
        kept.append(line)
        size += len(line) + 1
    if not kept:
        if hit.start_line != hit.end_line or remaining < 40:
            return None
        hit.text = hit.text[: remaining - 1]
        hit.cost = remaining
        return hit
    contiguous = _contiguous(hit)
    hit.text = "\n".join(kept)
    hit.cost = size
    if contiguous:
        hit.end_line = hit.start_line + len(kept) - 1
    return hit


def pack(
    hits: list[Hit], max_results: int, budget: int, context: int, narrow_above: int, db: IndexDB | None
) -> list[Hit]:
    """The results an agent receives: narrowed, de-overlapped, packed into ``budget`` characters."""
    out: list[Hit] = []
    skipped: list[Hit] = []
    used = 0
    for hit in hits:
        if len(out) >= max_results or budget - used < 40:
            break
        hit = narrow(hit, context, narrow_above, db)
        span = (hit.start_line, hit.end_line, len(hit.text))
        trimmed = _trim_overlap(hit, out)
        if trimmed is None:
            continue
        if (trimmed.start_line, trimmed.end_line, len(trimmed.text)) != span:
            trimmed.cost = (
                _session_message_lengths(db, trimmed, range(trimmed.start_line, trimmed.end_line + 1))
                if trimmed.source == "sessions" and trimmed.line_map is not None
                else int(len(trimmed.text) * (_SESSION_SLACK if trimmed.source == "sessions" else 1)) + 1
            )
        if used + trimmed.cost <= budget:
            out.append(trimmed)
            used += trimmed.cost
        else:
            skipped.append(trimmed)
    if skipped and len(out) < max_results and budget - used >= 200:
        cut = _cut(skipped[0], budget - used)
        if cut is not None:
            out.append(cut)
    return out
