"""Knowledge updates: a newer statement of a fact ranks above the one it replaces, which is marked.

Three strengths, strongest first (docs/facts.md):

* **markup**: ``<!-- supersedes: memory/2026-03-02.md#L6 -->`` beside (or above) a statement
  (search/markup.py). Every hit whose statement it names is marked ``supersededBy`` that line and
  ranked just below it, wherever it ranked; when the replacing statement is not among the hits, it
  is brought in, with the score of the statement it replaces.
* **detected**: two hits of the head of the ranking, certainly made at different times
  (search/dating.py), whose statements (the sentence of each statement line that matches the
  question best) are about one subject and the newer changes it: it names the older's value as
  replaced, says so ("no longer", "switched", ...), or a value differs (search/restatement.py).
  The older is marked ``supersededBy`` the newer, which is raised to just above it. Statements
  about another subject (another person, item, sprint, date; a checklist beside a date) are left
  alone.
* **possible**: about one subject, but nothing shows a change, or the older statement is worded
  like ``SERIES`` or more others but for their numbers (a series of entries, such as "report 3",
  "report 4", rather than one fact changing): the explanation says "possibly restated by"; nothing
  is marked or moved (unless ``margin`` is raised: then dated notes trade scores when the older is
  ahead by less than it, in logit).

Nothing is ever removed: a raised statement takes the score of the one it replaces (it answers the
same question at least as well); the replaced one keeps its own score and stays where it was among
the others, so it is never pushed out of the results by its replacement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from mdrecall.search.budget import Hit, message_map
from mdrecall.search.dating import FileTimes, Stated, focus, focus_text, plain_path, stated
from mdrecall.search.markup import Mark
from mdrecall.search.relevance import QueryStats
from mdrecall.search.restatement import Statement, Verdict, compare, statement
from mdrecall.search.scope import ScopeLike, as_scope
from mdrecall.sources.workspace import note_date
from mdrecall.types import format_citation

#: Hits considered for detection (the head of the ranking): pairs below it cannot reach the results.
HEAD = 30
#: A statement worded like this many others but for their numbers looks like one entry of a
#: series (a daily report, a log with a counter), not a fact that changed: it is not marked.
SERIES = 3
#: How alike (Jaccard of their words, numbers aside) two statements of one series are.
_SERIES_LIKENESS = 0.8

By = Literal["markup", "detected"]


@dataclass(slots=True)
class Link:
    """``older`` is superseded by ``newer``."""

    older: Hit
    newer: Hit
    by: By


class Reading:
    """What detection reads of one search's hits, each read once: a statement per statement text,
    when a statement was made per hit line, a verdict per pair of statements. All are functions of
    those inputs and the query (``stats``), so what was read ahead while the query was embedded
    (:meth:`ahead`, from search/pipeline.py) is what detection finds after it, unchanged."""

    def __init__(self, stats: QueryStats, tokens: Callable[[str], list[str]], times: FileTimes | None) -> None:
        self.stats, self.tokens, self.times = stats, tokens, times
        self._statements: dict[str, Statement | None] = {}
        self._stated: dict[tuple[str, str, tuple[int, int], str], Stated] = {}
        # (id(older), id(newer)) -> (older, newer, verdict): the pair held, so its ids stay theirs
        self._verdicts: dict[tuple[int, int], tuple[Statement, Statement, tuple[Verdict, str | None]]] = {}

    def statement(self, hit: Hit) -> Statement | None:
        text = focus_text(hit)
        try:
            return self._statements[text]
        except KeyError:
            found = self._statements[text] = statement(text, self.stats, self.tokens)
            return found

    def when(self, hit: Hit) -> Stated:
        # The text is part of the key: a file's line read from two chunks is one line only when
        # both chunks hold it as it is (a split long line is dated by the whole chunk's text).
        key = (hit.path, hit.source, focus(hit), hit.text)
        found = self._stated.get(key)
        if found is None:
            found = self._stated[key] = stated(hit, self.times)
        return found

    def compare(self, older: Statement, newer: Statement) -> tuple[Verdict, str | None]:
        key = (id(older), id(newer))
        found = self._verdicts.get(key)
        if found is None:
            found = self._verdicts[key] = (older, newer, compare(older, newer, self.tokens, self.stats))
        return found[2]

    def ahead(self, hits: Sequence[Hit], done: Callable[[], bool]) -> None:
        """Read what :func:`_detect` would read of ``hits`` (a likely head, best first), until
        ``done()``: their statements first, then when each was made, then the verdicts of the pairs
        it would compare. Nothing is decided here; a hit read in vain only cost the wait."""
        read: list[tuple[Hit, Statement]] = []
        for hit in hits:
            if done():
                return
            mine = self.statement(hit)
            if mine is not None:
                read.append((hit, mine))
        dated: list[tuple[Hit, Statement, Stated]] = []
        for hit, mine in read:
            if done():
                return
            dated.append((hit, mine, self.when(hit)))
        for older, mine, when_old in dated:
            latest = when_old.latest
            if latest is None:
                continue
            for newer, theirs, when_new in dated:
                if done():
                    return
                first = when_new.earliest
                if newer.path != older.path and first is not None and latest < first and not mine.terms.isdisjoint(theirs.terms):
                    self.compare(mine, theirs)


@dataclass
class Context:
    """What detection reads besides the hits."""

    stats: QueryStats | None
    tokens: Callable[[str], list[str]]
    times: FileTimes | None
    margin: float
    detect: bool = True
    #: Marks whose statements this search may see, made by the as-of time (when there is one).
    marks: Sequence[Mark] = ()
    scope: ScopeLike = None
    as_of: datetime | None = None
    #: What was read of this search's statements already (``Reading.ahead``), for these stats,
    #: tokens and times; None: a reading of its own.
    reading: Reading | None = None
    _stated: dict[int, Stated] = field(default_factory=dict)
    _statements: dict[int, Statement | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # (A bound method is made anew on each access: the same tokenizer's compare equal.)
        if self.stats is not None and (self.reading is None or self.reading.stats is not self.stats
                                       or self.reading.tokens != self.tokens or self.reading.times is not self.times):  # fmt: skip
            self.reading = Reading(self.stats, self.tokens, self.times)

    def when(self, hit: Hit) -> Stated:
        key = id(hit)
        if key not in self._stated:
            self._stated[key] = self.reading.when(hit) if self.reading is not None else stated(hit, self.times)
        return self._stated[key]

    def statement(self, hit: Hit) -> Statement | None:
        """The sentence of the hit's statement line that matches the question best."""
        key = id(hit)
        if key not in self._statements:
            self._statements[key] = self.reading.statement(hit) if self.reading is not None else None
        return self._statements[key]

    def compare(self, older: Statement, newer: Statement) -> tuple[Verdict, str | None]:
        if self.reading is None:  # no statistics: no statements to compare
            return "different", None
        return self.reading.compare(older, newer)


def cite_focus(hit: Hit) -> str:
    """The citation of the hit's statement line (its best-matching line, or message)."""
    lo, hi = focus(hit)
    return format_citation(hit.path, lo, hi)


def _note(hit: Hit, **entries: Any) -> None:
    hit.supersession = {**(hit.supersession or {}), **entries}


def _add_to(hit: Hit, key: str, citation: str) -> None:
    found = list((hit.supersession or {}).get(key, []))
    if citation not in found:
        found.append(citation)
    _note(hit, **{key: found})


# -- markup ---------------------------------------------------------------------------------------


def _mark_known(mark: Mark, ctx: Context) -> bool:
    if not as_scope(ctx.scope).allows(mark.source, mark.path):
        return False
    if ctx.as_of is None:
        return True
    day = note_date(plain_path(mark.path))
    if day is not None:
        return day <= ctx.as_of.date()
    modified = ctx.times.mtime(mark.path) if ctx.times is not None else None
    return modified is not None and modified <= ctx.as_of


def _apply_marks(hits: list[Hit], ctx: Context) -> list[Link]:
    marks = [m for m in ctx.marks if _mark_known(m, ctx)]
    if not marks:
        return []
    links: list[Link] = []
    for older in list(hits):
        if older.superseded_by is not None or older.source != "memory":
            continue
        lo, hi = focus(older)
        mark = next((m for m in marks if m.covers(older.path, lo, hi)), None)
        if mark is None:
            continue
        newer = next((h for h in hits if h is not older and h.path == mark.path and h.start_line <= mark.line <= h.end_line), None)
        if newer is None and mark.rowid is not None:
            # The replacement did not match the query (it may say it in other words): it takes the
            # place of what it replaces, so a reader gets both.
            newer = Hit(mark.rowid, mark.path, mark.source, mark.line, mark.line, mark.text, score=older.score,
                        logit=older.logit, line_weights=[1.0])  # fmt: skip
            hits.insert(hits.index(older), newer)
            _note(newer, broughtIn="by its supersedes markup, with the score of the statement it replaces")
        older.superseded_by = mark.citation
        _note(older, supersededBy=mark.citation, by="markup")
        if newer is not None:
            _add_to(newer, "supersedes", cite_focus(older))
            links.append(Link(older, newer, "markup"))
    return links


# -- detection ------------------------------------------------------------------------------------


def _series(older: Hit, head: list[Hit], ctx: Context) -> bool:
    mine = ctx.statement(older)
    if mine is None or not mine.words:
        return False
    alike = 0
    for h in head:
        other = ctx.statement(h) if h is not older and h.path != older.path else None
        if other is not None and other.words and len(mine.words & other.words) / len(mine.words | other.words) >= _SERIES_LIKENESS:
            alike += 1
    return alike >= SERIES


def _detect(hits: list[Hit], ctx: Context) -> list[Link]:
    head = [h for h in hits[:HEAD] if h.evidence is not None]
    links: list[Link] = []
    earliest: list[datetime | None] | None = None
    for older in head:
        if older.superseded_by is not None:
            continue
        mine = ctx.statement(older)
        when_old = ctx.when(older)
        if mine is None or when_old.latest is None:
            continue
        # Another file only: a later message of the same conversation (or line of the same note)
        # echoing a statement is not a change of mind.
        if earliest is None:  # each hit's time, read once
            earliest = [ctx.when(h).earliest for h in head]
        latest = when_old.latest
        later: list[tuple[Hit, Verdict, str | None]] = []
        for h, first in zip(head, earliest, strict=True):
            # when_old.before(when(h)), without two calls per pair (30 × 30 a search)
            if h.path == older.path or first is None or not latest < first:
                continue
            theirs = ctx.statement(h)  # only a later hit's (kept by ctx): most are never compared
            # Without a query term in common two statements are "different" (compare's first test),
            # as most pairs are: told here, without a call.
            if theirs is not None and ctx.stats is not None and not mine.terms.isdisjoint(theirs.terms):
                verdict, why = ctx.compare(mine, theirs)
                if verdict != "different":
                    later.append((h, verdict, why))
        if not later:
            continue
        # The newest restatement the evidence supports; a possible one otherwise.
        later.sort(key=lambda item: ctx.when(item[0]).earliest or datetime.min, reverse=True)
        confident = None if _series(older, head, ctx) else next(((h, why) for h, v, why in later if v == "changed"), None)
        if confident is not None:
            newer, why = confident
            older.superseded_by = cite_focus(newer)
            _note(older, supersededBy=older.superseded_by, by="detected", why=why)
            _add_to(newer, "supersedes", cite_focus(older))
            links.append(Link(older, newer, "detected"))
            continue
        # Only a possible restatement: explained; the newest trades places with the older only when
        # it trails by less than the margin (0 by default: on LoCoMo's "when did ..." questions
        # later mentions of a past event are echoes, and moving them up cost recall@1), and only
        # between dated notes (in transcripts it cost LoCoMo recall@1 0.49 -> 0.48 even at 1.5).
        newer = later[0][0]
        _note(older, possiblyRestatedBy=cite_focus(newer))
        _add_to(newer, "possiblyRestates", cite_focus(older))
        i, j = hits.index(older), hits.index(newer)
        if i < j and older.logit - newer.logit <= ctx.margin and "sessions" not in (older.source, newer.source):
            _swap(hits, i, j)
            _note(older, moved=f"below the possible restatement {cite_focus(newer)} (scores swapped)")
            _note(newer, moved=f"above the older statement {cite_focus(older)} (scores swapped)")
    return links


# -- ordering -------------------------------------------------------------------------------------


def _swap(hits: list[Hit], i: int, j: int) -> None:
    """Trade places and scores: the list stays sorted by score, the set of scores unchanged."""
    a, b = hits[i], hits[j]
    a.logit, b.logit = b.logit, a.logit
    a.score, b.score = b.score, a.score
    hits[i], hits[j] = b, a


def _raise(hits: list[Hit], i: int, j: int) -> None:
    """Move ``hits[j]`` just above ``hits[i]`` (i < j), with its score: the list stays sorted."""
    older, newer = hits[i], hits.pop(j)
    newer.score, newer.logit = max(newer.score, older.score), max(newer.logit, older.logit)
    hits.insert(i, newer)


def enforce(hits: list[Hit], links: Sequence[Link]) -> None:
    """Each superseded hit directly below the hit that supersedes it (chains included): a newer
    statement ranked lower is raised to just above the one it replaces, with that one's score (it is
    at least as likely to answer); the older keeps its own score and place among the rest."""
    for _ in range(len(links) + 1):
        changed = False
        for link in links:
            position = {id(h): k for k, h in enumerate(hits)}
            i, j = position.get(id(link.older)), position.get(id(link.newer))
            if i is None or j is None or i > j:
                continue  # not both here, or already in order
            _raise(hits, i, j)
            changed = True
        if not changed:
            return


def supersede(hits: list[Hit], ctx: Context) -> list[Link]:
    """Mark and reorder ``hits`` (sorted by score) in place; the links to keep after later steps."""
    for hit in hits[:HEAD]:
        if hit.source == "sessions" and hit.line_map is None:
            hit.line_map = message_map(hit.text, hit.start_line, hit.end_line)  # what packing computes too
    links = _apply_marks(hits, ctx)
    if ctx.detect:
        links += _detect(hits, ctx)
    before = {id(h): k for k, h in enumerate(hits)}
    enforce(hits, links)
    for link in links:
        if before[id(link.older)] < before[id(link.newer)]:
            _note(link.newer, moved=f"raised above {cite_focus(link.older)}, which it supersedes (its score taken)")
    return links


__all__ = ["HEAD", "Context", "Link", "cite_focus", "enforce", "supersede"]
