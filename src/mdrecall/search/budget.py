"""Budget-aware results: cite only the matching part of a long hit, and pack the character budget.

An agent receives results in rank order until ``maxInjectedChars`` is spent. Two faults wasted it:
a hit on one line of a ten-line chunk cited (and injected) all ten lines, and a hit on one segment
of a 3,000-character transcript message cited the whole message, so two such hits filled the
budget before the short turn that held the answer. Here:

* **narrowing**: a Markdown hit longer than ``snippet.narrowAboveChars`` is cut to its best
  matching line (the most query-term weight) and ``snippet.contextLines`` lines either side; a
  transcript hit spanning several messages is cut to its best message and as many neighbours.
  Context shrinks until the citation fits (down to the matching line alone), so a 3,000-character
  reply next to a short matching line is not cited as its "context";
* **cost** is what the citation covers in full: the cited lines, or the whole cited messages of a
  transcript (an agent that opens the citation reads them), so the budget counts what a reader of
  the results really receives;
* **regions**: a hit that continues (or precedes) a kept hit of the same file joins it: one region
  of a file is one result, at the better hit's rank, and ``maxResults`` counts regions;
* **packing**: hits are taken in rank order while they fit; one that does not fit is skipped (not
  allowed to end the list), so later, shorter relevant hits still get in. After the first (the
  best match always leads), a hit that would spend more than a quarter of the budget is taken
  only if the results are worth at least as much with it as without it: worth is the expected
  number of relevant hits an agent receives (the sum of the calibrated probabilities behind the
  scores, search/relevance.py), the rest filled in rank order either way. One 3,000-character reply no longer displaces three short turns that are, together,
  more likely to hold the answer. Whatever budget is left at the end goes to the best skipped hit,
  cut to the lines (or characters) that fit, placed last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from mdrecall.search.filelines import LineLengths
from mdrecall.search.relevance import SCALE, KeywordEvidence

#: A hit citing more than this share of the budget must be worth what it displaces (see ``pack``).
EXPENSIVE_SHARE = 0.25


class Messages(Protocol):
    """Where the whole text of a transcript message can be looked up (search/corpus.py)."""

    def whole_message(self, path: str, message: int) -> list[str] | None: ...

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
    evidence: KeywordEvidence | None = None
    #: The calibrated parts behind ``logit`` (None: that side did not score it), the date boost in
    #: logit, the decay multiplier (None: decay off) and a supersession move: what the explanation shows.
    keyword_logit: float | None = None
    vector_logit: float | None = None
    date_boost: float = 0.0
    #: The question asks about one speaker's words and this hit states the other's (search/speaker.py),
    #: and what that costs its logit.
    other_speaker: bool = False
    speaker_logit: float = 0.0
    #: Who states the hit's matching line when that is not the asked speaker (explanations).
    stated_by: str | None = None
    decay: float | None = None
    #: Knowledge updates (search/supersede.py): the newer statement's citation when this one is
    #: known to be out of date, and what the explanation says about it.
    superseded_by: str | None = None
    supersession: dict[str, Any] | None = None
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


def _session_message_lengths(corpus: Messages | None, hit: Hit, messages: range) -> int:
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
        if not complete and corpus is not None:
            own = corpus.whole_message(hit.path, m) or own
        total += int(_content_length(own) * _SESSION_SLACK) + 1
    return total


def message_lines(rows: Sequence[tuple[int, int, str, list[int] | None]], message: int) -> list[str] | None:
    """The rendered lines of transcript message ``message`` from the chunks ``(start, end, text,
    stored line numbers or None)`` that cover it, each line once; None when none can be mapped."""
    seen: set[str] = set()
    out: list[str] = []
    for start, end, text, numbers in rows:
        mapping = numbers if numbers is not None and len(numbers) == text.count("\n") + 1 else message_map(text, start, end)
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
    top = max(weights) if weights else 0
    if top <= 0:
        return None
    best = weights.index(top)  # the first line of the best weight
    return max(0, best - context), min(len(weights) - 1, best + context)


def narrowed(hit: Hit, context: int) -> Hit | None:
    """A copy of ``hit`` cut to its best-matching line (or message) and ``context`` either side;
    None when it cannot be narrowed (one line, or no line matches a query term)."""
    lines = hit.text.split("\n")
    if hit.source == "sessions":
        if hit.line_map is None or hit.end_line == hit.start_line or not hit.line_weights:
            return None
        per_message = [0.0] * (hit.end_line - hit.start_line + 1)
        for w, n in zip(hit.line_weights, hit.line_map):
            per_message[n - hit.start_line] = max(per_message[n - hit.start_line], w)
        window = _best_window(per_message, context)
        if window is None:
            return None
        lo, hi = hit.start_line + window[0], hit.start_line + window[1]
        if (lo, hi) == (hit.start_line, hit.end_line):
            return None
        keep = [i for i, n in enumerate(hit.line_map) if lo <= n <= hi]
        return _copy(hit, lo, hi, [lines[i] for i in keep], [hit.line_weights[i] for i in keep],
                     [hit.line_map[i] for i in keep])
    if not _contiguous(hit) or len(lines) < 2:
        return None
    window = _best_window(hit.line_weights, context)
    if window is None or window == (0, len(lines) - 1):
        return None
    lo, hi = window
    return _copy(hit, hit.start_line + lo, hit.start_line + hi, lines[lo : hi + 1], hit.line_weights[lo : hi + 1], None)


def _copy(hit: Hit, start: int, end: int, lines: list[str], weights: list[float], line_map: list[int] | None) -> Hit:
    return replace(hit, start_line=start, end_line=end, text="\n".join(lines), line_weights=weights, cost=0,
                   line_map=line_map)


def cited_cost(hit: Hit, lengths: LineLengths | None, corpus: Messages | None) -> int:
    """Characters of everything the citation covers, counted as a reader of it gets them."""
    if lengths is not None:
        found = lengths(hit.path, hit.source)
        if found is not None and 1 <= hit.start_line <= hit.end_line <= len(found):
            return sum(found[n - 1] + 1 for n in range(hit.start_line, hit.end_line + 1))
    if hit.source == "sessions":
        if hit.line_map is not None:
            return _session_message_lengths(corpus, hit, range(hit.start_line, hit.end_line + 1))
        return int(len(hit.text) * _SESSION_SLACK) + 1
    return len(hit.text) + 1


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


def _cut(hit: Hit, remaining: int, lengths: LineLengths | None, corpus: Messages | None) -> Hit | None:
    """The leading whole lines (messages) of ``hit`` that fit ``remaining``; a single Markdown line
    that is the whole citation is cut mid-line instead."""
    lines = hit.text.split("\n")
    if hit.source == "sessions":
        if hit.line_map is None:
            return _snippet(hit, remaining)
        for last in range(hit.end_line - 1, hit.start_line - 1, -1):
            keep = [i for i, n in enumerate(hit.line_map) if n <= last]
            trial = _copy(hit, hit.start_line, last, [lines[i] for i in keep], [], [hit.line_map[i] for i in keep])
            trial.cost = cited_cost(trial, lengths, corpus)
            if trial.cost <= remaining:
                return trial
        return _snippet(hit, remaining)
    if _contiguous(hit):
        for last in range(len(lines) - 1, 0, -1):
            trial = _copy(hit, hit.start_line, hit.start_line + last - 1, lines[:last], [], None)
            trial.cost = cited_cost(trial, lengths, corpus)
            if trial.cost <= remaining:
                return trial
    if hit.start_line == hit.end_line:
        return _snippet(hit, remaining)
    return None


def _snippet(hit: Hit, remaining: int) -> Hit | None:
    """A message or line longer than the whole remaining budget: the start of the matching chunk,
    cut to fit, citing the first message (line) it comes from. Placed last, so it never stops the
    hits before it; a reader who needs the rest opens the citation."""
    if remaining < 40:
        return None
    lines = hit.text.split("\n")
    best = max(range(len(lines)), key=lambda i: (hit.line_weights[i], -i)) if len(hit.line_weights) == len(lines) else 0
    if hit.line_map is not None:
        message = hit.line_map[best]
        text = "\n".join(line for line, n in zip(lines, hit.line_map) if n == message)
        trial = _copy(hit, message, message, [text[: remaining - 1]], [], [message])
    else:
        # Which message each line came from is unknown here: cite the chunk's range, show the
        # best-matching part.
        text = "\n".join(lines[best:])
        trial = _copy(hit, hit.start_line, hit.end_line, [text[: remaining - 1]], [], None)
    trial.cost = remaining
    return trial


def _narrowest_needed(hit: Hit, context: int, limit: int, lengths: LineLengths | None, corpus: Messages | None) -> Hit:
    """``hit`` narrowed to its best line with as much of ``context`` either side as keeps the
    citation within ``limit`` characters: a long neighbour is dropped before the matching line
    is. The narrowest cut when none keeps within it; ``hit`` itself when none is smaller."""
    best = hit
    for lines in range(context, -1, -1):
        small = narrowed(hit, lines)
        if small is None:
            continue
        small.cost = cited_cost(small, lengths, corpus)
        if small.cost < best.cost:
            best = small
        if best.cost <= limit:
            break
    return best


class _Fitter:
    """Makes one hit ready to pack after the ``kept`` ones: de-overlapped, its cost counted,
    narrowed when it cites too much or does not fit ``room``."""

    def __init__(self, context: int, narrow_above: int, lengths: LineLengths | None, corpus: Messages | None,
                 prepare: Callable[[Hit], None] | None = None) -> None:
        self.context, self.narrow_above, self.lengths, self.corpus = context, narrow_above, lengths, corpus
        self.prepare = prepare

    def __call__(self, hit: Hit, kept: list[Hit], room: int, copy: bool = True) -> Hit | None:
        if self.prepare is not None:
            self.prepare(hit)
        # On the original, so the fill simulations of ``worth_less`` map each transcript hit once.
        if hit.source == "sessions" and hit.line_map is None:
            hit.line_map = message_map(hit.text, hit.start_line, hit.end_line)
        if copy:
            hit = replace(hit)
        trimmed = _trim_overlap(hit, kept)
        if trimmed is None:
            return None
        trimmed.cost = cited_cost(trimmed, self.lengths, self.corpus)
        if trimmed.cost > self.narrow_above or trimmed.cost > room:
            trimmed = _narrowest_needed(trimmed, self.context, min(self.narrow_above, room), self.lengths, self.corpus)
        return trimmed

    def fill_value(self, later: list[Hit], kept: list[Hit], slots: int, room: int) -> float:
        """The expected number of relevant hits that filling ``room`` from ``later`` in rank order adds."""
        value = 0.0
        taken = list(kept)
        for other in later:
            if slots <= 0 or room < 40:
                break
            ready = self(other, taken, room)
            if ready is None or ready.cost > room:
                continue
            room -= ready.cost
            slots -= 1
            value += SCALE.probability(ready.score)
            taken.append(ready)
        return value

    def worth_less(self, hit: Hit, later: list[Hit], kept: list[Hit], slots: int, room: int) -> bool:
        """Whether the results would be worth more without ``hit`` than with it."""
        with_it = SCALE.probability(hit.score) + self.fill_value(later, [*kept, hit], slots - 1, room - hit.cost)
        return self.fill_value(later, kept, slots, room) > with_it


def _merge_touching(hit: Hit, kept: list[Hit], narrow_above: int) -> bool:
    """Join ``hit`` to a kept hit of the same file whose lines (messages) it continues or precedes:
    one region of a file is one result, cited once, at the better hit's rank (neighbouring chunks of
    one conversation used to take a result each, so ten results covered a few regions). Not past
    ``narrow_above`` characters: a region is never wider than a citation may be."""
    for k, other in enumerate(kept):
        if other.path != hit.path or other.source != hit.source or other.cost + hit.cost > narrow_above:
            continue
        if hit.start_line == other.end_line + 1:
            first, second = other, hit
        elif other.start_line == hit.end_line + 1:
            first, second = hit, other
        else:
            continue
        if hit.source == "sessions":
            if first.line_map is None or second.line_map is None:
                continue
            line_map: list[int] | None = first.line_map + second.line_map
        elif _contiguous(first) and _contiguous(second):
            line_map = None
        else:
            continue
        weights = first.line_weights + second.line_weights
        if len(weights) != first.text.count("\n") + second.text.count("\n") + 2:
            weights = []
        joined = _copy(other, first.start_line, second.end_line, [first.text, second.text], weights, line_map)
        joined.cost = other.cost + hit.cost
        kept[k] = joined
        return True
    return False


class _PerFile:
    """``lengths`` asked once per file during one packing: costs are counted for every hit, every
    narrowing tried and every fill simulated, mostly of the same few files (each ask stats the file
    and resolves its path)."""

    def __init__(self, lengths: LineLengths) -> None:
        self.lengths = lengths
        self.found: dict[tuple[str, str], Sequence[int] | None] = {}

    def __call__(self, path: str, source: str) -> Sequence[int] | None:
        key = (path, source)
        if key not in self.found:
            self.found[key] = self.lengths(path, source)
        return self.found[key]


def pack(
    hits: list[Hit],
    max_results: int,
    budget: int,
    context: int,
    narrow_above: int,
    corpus: Messages | None,
    lengths: LineLengths | None = None,
    prepare: Callable[[Hit], None] | None = None,
) -> list[Hit]:
    """The results an agent receives, in rank order: de-overlapped, narrowed where they would not
    fit (or cite more than ``narrow_above`` characters), packed into ``budget`` characters.
    ``prepare``: called with each hit before packing reads it (the ranking's deferred steps)."""
    out: list[Hit] = []
    skipped: list[Hit] = []
    used = 0
    if lengths is not None:
        lengths = _PerFile(lengths)
    fit = _Fitter(context, narrow_above, lengths, corpus, prepare)
    for index, hit in enumerate(hits):
        if len(out) >= max_results or budget - used < 40:
            break
        trimmed = fit(hit, out, budget - used, copy=False)
        if trimmed is None:
            continue
        if used + trimmed.cost <= budget and not (
            out  # the best match always leads: only later hits are weighed
            and trimmed.cost > budget * EXPENSIVE_SHARE
            and fit.worth_less(trimmed, hits[index + 1 :], out, max_results - len(out), budget - used)
        ):
            if not _merge_touching(trimmed, out, narrow_above):
                out.append(trimmed)
            used += trimmed.cost
        else:
            skipped.append(trimmed)
    if skipped and len(out) < max_results and budget - used >= 200:
        cut = _cut(skipped[0], budget - used, lengths, corpus)
        if cut is not None:
            out.append(cut)
    return out
