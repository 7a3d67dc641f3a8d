"""Whether a later statement changes what an earlier one said: read sentence by sentence.

Supersession (search/supersede.py) used to compare two hits by the query's words: two chunks that
matched the query alike, whose best lines shared three query terms and differed in a number, were
one fact changing. That marked a release checklist as replacing the note with the release date
(both say "v0.4 release"), linked a Redis fixture fix to a database runbook (both say "database"),
and could say nothing about a one- or two-word question. Here the unit is the *statement*: the
sentence of a hit's statement line that matches the question best, and two statements are compared
by their own words:

* **another subject**: they name different identifiers ("sprint 12" / "sprint 13", "v0.4" / "v0.5"),
  different explicit dates (two trips, two meetings), different speakers ("Caroline: …" /
  "Melanie: …"), or each starts from a word the other never uses ("Caroline has 2 dogs" / "Melanie
  has 3 dogs"); or they share too few of their own words (under ``SAME_TOPIC`` of the shorter one's):
  they are about different things, and nothing is said;
* **changed**: the newer names the older's value as replaced ("moved the database *from Heroku*");
  or both hold at least half the question's term weight, they are about one subject (at least
  half of the shorter one's words shared), and the newer denies what the older said ("Bob *no
  longer commutes*") or a value differs both ways (17 postcards → 25);
* **possibly**: about one subject, but nothing shows a change: explained, never marked.

Everything here is a function of the two sentences and the query's terms; nothing is tuned on a
question (docs/facts.md has the figures: wrong marks on LoCoMo, where facts do not change, next to
recall on LongMemEval's knowledge updates).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from mdrecall.search.lru import IdleLru
from mdrecall.search.relevance import QueryStats
from mdrecall.text import ENGLISH_STOP_WORDS

Verdict = Literal["different", "possibly", "changed"]

#: The share of the shorter statement's own words the longer also uses, below which the two are
#: about different things (an overlap coefficient: conversation wraps a fact in chatter of any length).
SAME_TOPIC = 0.3
#: ... and from which they are about one subject (a change can be confident).
SAME_SUBJECT = 0.5
#: The newer denies what the older said: "no longer commutes", "don't play tennis anymore" (the
#: denied words must be the older's). Bare change words ("now", "currently", "instead", "moved")
#: come as often in conversation without a change of fact: alone they mark nothing.
_DENIES = re.compile(r"\bno\s+longer\s+((?:\w+\s+){0,3}\w+)|\b(?:not|n't|never)\s+((?:\w+\s+){0,4}?)\w*\s*anymore\b",
                     re.IGNORECASE)
#: The share of the question's term weight both statements must hold: they state the fact asked
#: about, not only its generic words ("years ago" of "where did Caroline move from 4 years ago?").
ASKED_SHARE = 0.5
#: The newer names what it replaced: "from X", "instead of X", "replaced X", "rather than X", "no longer X".
_REPLACED = re.compile(
    r"\b(?:(?:moved|switched|migrated|changed|transferred|upgraded|downgraded|went)\b[^.;]{0,40}?\bfrom"
    r"|instead\s+of|replac(?:ed|ing|es|e)|rather\s+than|no\s+longer\s+(?:\w+\s+)?)\s+"
    r"(?:(?:the|a|an|our|my|their|his|her|its|using|use)\s+)?([\w.+-]+)",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD = re.compile(r"[\w.+-]*\w")
#: Who speaks a chat line ("Caroline: …", "User: …"): each speaks of themselves.
_SPEAKER = re.compile(r"^\s*(?:[-*+]\s+)?(?:\[[^\]\n]{0,40}\]\s*)?([A-Z][\w .'-]{0,30}?|user|assistant)\s*:\s", re.IGNORECASE)
#: Explicit dates and times ("2026-11-12", "7/22", "2:30", "March 3"): the when of an event.
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}[/.]\d{1,2}(?:[/.]\d{2,4})?\b|\b\d{1,2}:\d{2}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?\b",
    re.IGNORECASE,
)
#: An identifier: a version ("v0.4") or a capitalised word with a number ("Sprint 12", "Charge 3").
_IDENT = re.compile(r"\bv\d+(?:\.\d+)*\b|\b([A-Z][\w-]*)\s+#?(\d+(?:\.\d+)?)\b")
#: What is never a value: bracketed text that is not a link's ("[D3:11]", "[x]", "[shares a photo
#: of three children on the beach]": a label, a check box or what an attachment shows, not what the
#: speaker states: two photos of a family are not its size changing), comments, citations.
_NOISE = re.compile(r"\[[^\]\n]{0,400}\](?!\()|<!--.*?-->|\b[\w./-]+#L\d+(?:-L\d+)?\b")
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)?$")
_DIGIT = re.compile(r"\d")
_NUMBER_WORDS = {
    w: i for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}  # fmt: skip
_LINE_PREFIX = re.compile(r"^\s*(?:[-*+]\s+)?(?:\d{4}-\d{2}-\d{2}:\s*)?")


@dataclass(frozen=True, slots=True)
class Statement:
    """One sentence of a hit, as it is compared with another."""

    text: str
    #: Its content words, stemmed (stop words, numbers, dates and identifiers aside).
    words: frozenset[str]
    #: Values: numbers and number words that are not dates, times, labels or identifiers.
    numbers: frozenset[str]
    #: Identifiers, ``(word, number)``: a version is ``("v", "0.4")``.
    idents: frozenset[tuple[str, str]]
    dates: frozenset[str]
    #: The query's terms it holds (indexes into ``QueryStats.terms``).
    terms: frozenset[int]
    #: Who says it (a chat line's speaker, lower-cased), None: not said.
    speaker: str | None = None
    #: Its first content word, stemmed: what it is about, often.
    lead: str | None = None


def statement(text: str, stats: QueryStats, tokens: Callable[[str], list[str]]) -> Statement | None:
    """The sentence of ``text`` that holds most of the query's term weight (None: none holds any)."""
    best: _Sentence | None = None
    best_terms: frozenset[int] = frozenset()
    best_weight = 0.0
    parsed = _sentences(text, tokens)
    asked, plain = _asked_stems(stats)
    # A chat line's speaker is part of what it states ("Caroline: I have 2 dogs" says Caroline has
    # them), so a question naming them ("how many dogs does Caroline have?") finds its name there.
    speaker = parsed.speaker_stems
    if speaker is None:
        speaker = parsed.speaker_stems = frozenset(tokens(parsed.speaker)) if parsed.speaker else frozenset()
    idf = stats.idf
    for sentence in parsed.sentences:
        if sentence.stems.isdisjoint(asked):
            continue  # holds none of the query's terms: weight 0, never the best
        stems = sentence.stems | speaker if speaker else sentence.stems
        terms = frozenset([i for i, form in plain if form <= stems])
        weight = 0.0
        for i in terms:  # the set's order: the same float sum as before
            weight += idf[i]
        if weight > best_weight:
            best, best_terms, best_weight = sentence, terms, weight
    if best is None:
        return None
    read = best.read
    if read is None:
        read = best.read = _read(best.text, frozenset(), tokens, parsed.speaker)
    return Statement(read.text, read.words, read.numbers, read.idents, read.dates, best_terms, read.speaker, read.lead)


def _asked_stems(stats: QueryStats) -> tuple[frozenset[str], list[tuple[int, frozenset[str]]]]:
    """Every stem of the query's (non-CJK) terms: a sentence without one holds no term; and those
    terms with their index and stems (a sentence holds a term when it holds all its stems). Kept
    for the last query's statistics (a search asks once per hit of its head), checked by value."""
    global _LAST_ASKED
    last = _LAST_ASKED
    if last is not None and last[0] is stats and last[1] == stats.forms and last[2] == stats.cjk:
        return last[3], last[4]
    found = frozenset(s for form, cjk in zip(stats.forms, stats.cjk, strict=True) if not cjk for s in form)
    plain = [(i, frozenset(form)) for i, (form, cjk) in enumerate(zip(stats.forms, stats.cjk, strict=True)) if not cjk and form]
    _LAST_ASKED = (stats, list(stats.forms), list(stats.cjk), found, plain)
    return found, plain


_LAST_ASKED: (
    tuple[QueryStats, list[tuple[str, ...]], list[bool], frozenset[str], list[tuple[int, frozenset[str]]]] | None
) = None


@dataclass(slots=True)
class _Sentence:
    text: str
    stems: frozenset[str]
    #: The sentence read (``_read``) with no query terms, once it was asked for.
    read: Statement | None = None


@dataclass(slots=True)
class _Parsed:
    speaker: str | None
    sentences: list[_Sentence]
    #: The speaker's stems, once asked for (None: not yet).
    speaker_stems: frozenset[str] | None = None


#: Texts whose sentences are kept per tokenizer (least recently used dropped first, and none unused
#: for search.lru.IDLE_S: an edited chunk's old text is never asked for again).
PARSED_TEXTS = 4096
_PARSED: weakref.WeakKeyDictionary[object, IdleLru[str, _Parsed]] = weakref.WeakKeyDictionary()
_PARSED_LOCK = threading.Lock()


def _sentences(text: str, tokens: Callable[[str], list[str]]) -> _Parsed:
    """``text`` cut into the sentences that may state something, with their stems: the same for
    every query, so kept per tokenizer (the object behind ``tokens``; a tokenizer's stems of a text
    never change) for the texts supersession looks at search after search."""
    owner = getattr(tokens, "__self__", tokens)
    cache: IdleLru[str, _Parsed] | None
    try:
        cache = _PARSED.get(owner)  # a read needs no lock (asked per statement); adding one does
        if cache is None:
            with _PARSED_LOCK:
                cache = _PARSED.get(owner)
                if cache is None:
                    cache = _PARSED[owner] = IdleLru(PARSED_TEXTS)
    except TypeError:  # a tokenizer that cannot be weakly referenced or hashed: nothing kept
        cache = None
    found = cache.get(text) if cache is not None else None
    if found is None:
        found = _parse(text, tokens)
        if cache is not None:
            cache.put(text, found)
    return found


def _parse(text: str, tokens: Callable[[str], list[str]]) -> _Parsed:
    found = _SPEAKER.match(text)
    speaker = found.group(1).strip().lower() if found else None
    body = text[found.end():] if found else text
    if "[" in body or "<!--" in body or "#L" in body:  # what _NOISE needs to match: most lines have none
        body = _NOISE.sub(" ", body)
    out: list[_Sentence] = []
    for sentence in _SENTENCE.split(body):
        sentence = _LINE_PREFIX.sub("", sentence).strip()
        if not sentence or sentence.startswith("#") or _question(sentence):
            continue  # a heading or a question states nothing
        out.append(_Sentence(sentence, frozenset(tokens(sentence))))
    return _Parsed(speaker, out)


_ASKING = frozenset(
    "what when where why who whom whose which how do does did is are was were can could would will should shall "
    "have has had may might any anything isn't aren't don't didn't doesn't won't".split()
)


def _question(sentence: str) -> bool:
    """A question, not a statement: "Do you have any plans?" (but "I've used it for 6 months, any tips?" states)."""
    if not sentence.endswith("?"):
        return False
    first = _WORD.match(sentence.lstrip("\"'“(*_ "))
    return first is not None and first.group(0).lower() in _ASKING


def _read(sentence: str, terms: frozenset[int], tokens: Callable[[str], list[str]], speaker: str | None) -> Statement:
    dates: frozenset[str] = frozenset()
    idents: set[tuple[str, str]] = set()
    rest = sentence
    if _DIGIT.search(sentence):  # every date and identifier has a digit: most sentences, none
        dates = frozenset(m.group(0).lower() for m in _DATE.finditer(sentence))
        rest = _DATE.sub(" ", sentence)
        for m in _IDENT.finditer(rest):
            idents.add(("v", m.group(0)[1:]) if m.group(1) is None else (m.group(1).lower(), m.group(2)))
        rest = _IDENT.sub(" ", rest)
    rest = rest.replace("’", "'").replace("'", " ")
    numbers: set[str] = set()
    content: list[str] = []
    for raw in _WORD.findall(rest):
        low = raw.lower()
        if _NUMBER.match(low):
            numbers.add(low.replace(",", "."))
            continue
        if low in _NUMBER_WORDS:
            numbers.add(str(_NUMBER_WORDS[low]))
            continue
        if low in ENGLISH_STOP_WORDS or len(low) < 2 or not low[0].isalpha():
            continue
        content.append(low)
    # One tokenizer call for all the content words: a space always separates tokens, so this is
    # each word's stems in turn (the lead: the first word's first), at a call instead of one a word.
    stems = tokens(" ".join(content)) if content else []
    lead = stems[0] if stems else None
    return Statement(sentence, frozenset(stems), frozenset(numbers), frozenset(idents), dates, terms, speaker, lead)


def compare(
    older: Statement, newer: Statement, tokens: Callable[[str], list[str]], stats: QueryStats
) -> tuple[Verdict, str | None]:
    """Whether ``newer`` changes what ``older`` said, and why."""
    shared = older.terms & newer.terms
    if not shared or _other_subject(older, newer):
        return "different", None
    shorter = min(len(older.words), len(newer.words))
    likeness = len(older.words & newer.words) / shorter if shorter else 0.0
    if likeness < SAME_TOPIC:
        return "different", None
    replaced = _replaced_value(older, newer, tokens)
    if replaced is not None:  # the newer names what it replaced: that alone ties the two
        return "changed", f"the newer says it replaced {replaced!r}"
    if sum(stats.idf[i] for i in shared) < ASKED_SHARE * stats.total_idf:
        return "different", None
    if likeness >= SAME_SUBJECT:
        denied = _denied(older, newer, tokens)
        if denied is not None:
            return "changed", f"the newer says {denied!r}"
        gone, new = older.numbers - newer.numbers, newer.numbers - older.numbers
        if gone and new:
            return "changed", f"value changed ({', '.join(sorted(gone))} → {', '.join(sorted(new))})"
    return "possibly", None


def _other_subject(older: Statement, newer: Statement) -> bool:
    """Different speakers, identifiers or explicit dates, or each starting from a word the other
    never uses: two facts, not one fact changing."""
    if older.speaker is not None and newer.speaker is not None and older.speaker != newer.speaker:
        return True
    if older.idents and newer.idents:  # most statements name no identifier
        old_ids = dict(older.idents)
        if any(word in old_ids and old_ids[word] != number for word, number in newer.idents):
            return True
    if older.dates and newer.dates and not older.dates & newer.dates:
        return True
    return (older.lead is not None and newer.lead is not None and older.lead not in newer.words
            and newer.lead not in older.words)  # fmt: skip


def _replaced_value(older: Statement, newer: Statement, tokens: Callable[[str], list[str]]) -> str | None:
    """A word of the older statement that the newer names as what it replaced. Read per compared pair
    that gets this far (few do): reading it for every statement read cost more at 1M chunks, where
    nearly every statement is read once."""
    own = older.words
    for word in _replacing(newer.text):
        stems = tokens(word.lower())
        if stems and all(s in own for s in stems):
            return word
    return None


def _replacing(text: str) -> tuple[str, ...]:
    """The words ``text`` names as replaced, stop words aside, in order. A function of the text
    alone, kept (``_REPLACING``): a newer statement is compared with most of a search's head, and the
    pattern, run once per pair, was 8 % of a 200-chunk search's ranking."""
    found = _REPLACING.get(text)
    if found is None:
        found = tuple(word for m in _REPLACED.finditer(text) if (word := m.group(1)).lower() not in ENGLISH_STOP_WORDS)
        _REPLACING.put(text, found)
    return found


_REPLACING: IdleLru[str, tuple[str, ...]] = IdleLru(PARSED_TEXTS)


def _denied(older: Statement, newer: Statement, tokens: Callable[[str], list[str]]) -> str | None:
    """The newer's denial of words the older said ("no longer commutes"), as written."""
    for m in _DENIES.finditer(newer.text):
        clause = m.group(1) or m.group(2) or ""
        stems = {s for w in clause.split() if w.lower() not in ENGLISH_STOP_WORDS for s in tokens(w.lower())}
        if stems & older.words:
            return m.group(0).strip()
    return None


__all__ = ["ASKED_SHARE", "SAME_SUBJECT", "SAME_TOPIC", "Statement", "Verdict", "compare", "statement"]
