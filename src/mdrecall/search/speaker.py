"""Whose statement a question asks about, and which line of a hit is that speaker's.

An agent's memory of a conversation holds two kinds of lines: what the user said (their facts,
plans and preferences) and what the assistant replied (often long, and repeating the user's words
back). A question in the first person ("where do I keep my old sneakers?") asks about the user's
own statement; one that recalls the assistant's words ("the brand you mentioned", "the list you
provided") asks about a reply. Narrowing a hit to its best-matching line used to pick whichever
line repeated the question's words most, which is often the reply; here the line a citation keeps
is chosen among the asked speaker's lines first.

Only lines that say who spoke count: transcript messages (``User:`` / ``Assistant:``) and Markdown
lines written as ``- user: …`` / ``- assistant: …``.

Conversations between people, and notes kept per person, say it by name: ``- [D1:3] Caroline: …``,
``Melanie: …`` inside a transcript message, ``- Tomás: will fix the importer``. A question that
names one of them ("What pets does Melanie have?") asks about that person's own statements: a hit
whose matching line is the other person's ("Caroline: do you have any pets?") states someone else's
words. A name counts as a speaker only where it labels at least two lines of the files searched
(conversations, meetings), so a one-off label ("- Stack: FastAPI") is never taken for a person.

An exchange is read as one: a matching line that is a question, answered on the next line by the
asked speaker, is that speaker's statement (the reply holds the answer; the question repeats the
words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from mdrecall.search.lru import IdleLru

Speaker = Literal["user", "assistant"]

#: The question recalls what the assistant said: "you" as the subject of a past act of telling.
_ASKS_ASSISTANT = re.compile(
    r"\byou(?:\s+\w+)?\s+(?:mentioned|said|told|recommended|suggested|provided|gave|listed|shared|made|explained|"
    r"described|wrote|proposed|came up with|offered|named|played|chose|picked|calculated|included)\b"
    r"|\byour\s+(?:previous\s+|last\s+|earlier\s+)?(?:answer|reply|response|suggestions?|recommendations?|list|advice)\b",
    re.IGNORECASE,
)
#: The question is in the first person.
_FIRST_PERSON = re.compile(r"\b(?:i|i['’](?:m|ve|d|ll)|my|me|mine|myself)\b", re.IGNORECASE)
#: Request formulas addressed to the assistant, not about the user: "can you remind me what the
#: framerate gain was" asks for a fact whoever stated it.
_REQUEST = re.compile(r"\b(?:remind|tell|show|give|help|let)\s+me\b", re.IGNORECASE)
#: How a Markdown line says who spoke ("- user: …", "* Assistant: …").
_MARKDOWN_SPEAKER = re.compile(r"^\s*(?:[-*+]\s+)?(user|assistant)\s*:", re.IGNORECASE)
_SESSION_SPEAKER = {"User: ": "user", "Assistant: ": "assistant"}
#: How a line names who speaks (or whom it is about): "Caroline: …", "- [D1:3] Caroline: …",
#: "- **Tomás Ribeiro**: …"; one or two words, the first a capitalised letter.
_NAMED = re.compile(r"^\s*(?:[-*+]\s+)?(?:\[[^\]\n]{0,40}\]\s*)?(?:\*\*)?([^\W\d_][\w'’.-]{0,30}(?: [^\W\d_][\w'’.-]{0,30})?)"
                    r"(?:\*\*)?\s*:\s")
_ROLES = frozenset({"user", "assistant", "system"})
_QUERY_WORD = re.compile(r"[^\W\d_][\w'’-]*")
#: A line that asks rather than states (its last sentence ends with a question mark).
_QUESTION = re.compile(r"\?\s*(?:\[[^\]]*\])?\s*$")
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
#: What a chat line says it shares, after its words ("[shares a photo of …]").
_ANNOTATION = re.compile(r"\s*\[[^\]\n]*\]\s*$")


def asked_speaker(query: str) -> Speaker | None:
    """Whose statement ``query`` asks about (None: it does not say)."""
    if _ASKS_ASSISTANT.search(query):
        return "assistant"
    if _FIRST_PERSON.search(_REQUEST.sub(" ", query)):
        return "user"
    return None


#: Who a question can be about besides people named: the user and the team ("I", "we", "the
#: user's"), the assistant ("you said", "the assistant").
_SOMEONE = re.compile(
    r"\b(?:i|i['’](?:m|ve|d|ll)|my|me|mine|myself|we|we['’](?:re|ve|d|ll)|our|ours|us|ourselves|user|user['’]s|users|"
    r"assistant)\b",
    re.IGNORECASE,
)
#: How a question starts (or ends): a lookup ("on-call rotation") is neither.
_ASKING = re.compile(
    r"^\s*(?:who|whom|whose|what|when|where|which|why|how|is|are|was|were|do|does|did|can|could|should|would|will|"
    r"has|have|had)\b|\?\s*$",
    re.IGNORECASE,
)


def about_someone(query: str, people: frozenset[str]) -> bool:
    """Whether ``query`` asks about someone: the user or the team in the first person, the
    assistant, or a person of ``people`` (the memory's speakers) by name. A request formula ("tell
    me …", "remind me …") is not itself about anyone."""
    if asked_speaker(query) is not None or asked_names(query, people):
        return True
    return bool(_SOMEONE.search(_REQUEST.sub(" ", query)))


def general_question(query: str, people: frozenset[str]) -> bool:
    """A question (not a keyword lookup) about no one this memory knows: general knowledge
    ("What is the Chandrasekhar limit?"), which a personal memory answers only on strong evidence."""
    return bool(_ASKING.search(query)) and not about_someone(query, people)


def line_name(text: str) -> str | None:
    """The person a line names as its speaker (or subject), case-folded; None: it names nobody.
    For a transcript line, ``text`` is the message content (after any role prefix)."""
    found = _NAMED.match(text)
    if found is None:
        return None
    name = found.group(1)
    if not name[0].isupper() or name.casefold() in _ROLES:
        return None
    return name.casefold()


def session_content(line: str) -> str:
    """A rendered transcript line without its role prefix."""
    for prefix in _SESSION_SPEAKER:
        if line.startswith(prefix):
            return line[len(prefix):]
    return line


def name_counts(names: Sequence[str | None]) -> dict[str, int]:
    """How many lines each name labels."""
    out: dict[str, int] = {}
    for name in names:
        if name is not None:
            out[name] = out.get(name, 0) + 1
    return out


def speaker_names(counts: Iterable[dict[str, int]]) -> frozenset[str]:
    """The names that label at least two lines (of the files ``counts`` are of): the people of a
    conversation or a meeting, not a one-off label ("- Stack: FastAPI")."""
    total: dict[str, int] = {}
    for one in counts:
        for name, n in one.items():
            total[name] = total.get(name, 0) + n
    return frozenset(name for name, n in total.items() if n >= 2)


def asked_names(query: str, known: frozenset[str]) -> frozenset[str]:
    """The speakers among ``known`` that ``query`` names: a whole name or its first word (any case),
    or a capitalised short form of it ("Mel" for Melanie); a possessive counts ("John's")."""
    if not known:
        return frozenset()
    out: set[str] = set()
    for word in _QUERY_WORD.findall(query):
        if word.endswith(("'s", "’s")):
            word = word[:-2]
        folded = word.casefold()
        for name in known:
            first = name.split(" ", 1)[0]
            if folded in (name, first) or (len(word) >= 3 and word[0].isupper() and first.startswith(folded)):
                out.add(name)
    return frozenset(out)


def is_question(line: str, holds: Callable[[str], bool] | None = None) -> bool:
    """Whether a line asks rather than states: every sentence of it that holds the query's words
    (``holds``) is a question ("Is it a yoga studio? It looks awesome!" asks about the studio);
    without such a sentence, whether the line ends with one."""
    if "?" not in line:  # what follows only removes text: no question mark, no question (the common case)
        return False
    sentences = _line_sentences(line)
    if not sentences:
        return False
    matching = [asks for part, asks in sentences if holds(part)] if holds is not None else []
    return all(matching) if matching else sentences[-1][1]


def _line_sentences(line: str) -> tuple[tuple[str, bool], ...]:
    """The sentences of what ``line`` says, each with whether it ends as a question: a function of the
    line alone, kept (``_SENTENCES_OF``) for the lines that come back search after search."""
    found = _SENTENCES_OF.get(line)
    if found is None:
        said = session_content(line)
        named = _NAMED.match(said)
        if named is not None:
            said = said[named.end():]  # the speaker's name is not what the line says
        said = _ANNOTATION.sub("", said)
        found = tuple((part, _QUESTION.search(part) is not None) for part in _SENTENCES.split(said.strip()) if part)
        _SENTENCES_OF.put(line, found)
    return found


_SENTENCES_OF: IdleLru[str, tuple[tuple[str, bool], ...]] = IdleLru(4096)


def line_speakers(text: str, source: str, line_map: Sequence[int] | None) -> list[Speaker | None]:
    """Who spoke each line of a hit's text (None: not said). A transcript message's unprefixed
    continuation lines belong to the speaker of that message (``line_map``: the message of each line)."""
    lines = text.split("\n")
    if source != "sessions":
        return [markdown_speaker(line) for line in lines]
    own: list[Speaker | None] = [_session_speaker(line) for line in lines]
    if line_map is None or len(line_map) != len(lines):
        return own
    by_message: dict[int, Speaker] = {}
    for speaker, message in zip(own, line_map):
        if speaker is not None:
            by_message.setdefault(message, speaker)
    return [by_message.get(message) for message in line_map]


def markdown_speaker(line: str) -> Speaker | None:
    """Who spoke a Markdown line written as ``- user: …`` / ``- assistant: …`` (None: not said)."""
    found = _MARKDOWN_SPEAKER.match(line)
    if found is None:
        return None
    return "user" if found.group(1).lower() == "user" else "assistant"


def _session_speaker(line: str) -> Speaker | None:
    for prefix, speaker in _SESSION_SPEAKER.items():
        if line.startswith(prefix):
            return speaker  # type: ignore[return-value]
    return None


def _is(label: str | None, wanted: str | frozenset[str]) -> bool:
    return label is not None and (label == wanted if isinstance(wanted, str) else label in wanted)


def prefer(weights: Sequence[float], speakers: Sequence[str | None], wanted: str | frozenset[str] | None) -> list[float]:
    """``weights`` (query-term weight per line) with the other speakers' lines set to 0 when a line
    of a wanted speaker matches (with a tenth of the best line's weight); unchanged otherwise. Lines that do not say who spoke keep
    their weight: only a known other speaker gives way."""
    out = list(weights)
    if not wanted or len(speakers) != len(out) or not out:
        return out
    # A match on a term that is everywhere (the asked person's own name) is no match.
    floor = 0.1 * max(out)
    if not any(w > floor and _is(s, wanted) for w, s in zip(out, speakers)):
        return out
    return [0.0 if s is not None and not _is(s, wanted) else w for w, s in zip(out, speakers)]


def other_speaker(weights: Sequence[float], speakers: Sequence[str | None], wanted: str | frozenset[str] | None) -> bool:
    """Whether the line a hit states its match on (its best-weighted line; every line when none
    matches) is another known speaker's: an assistant's reply to a question about the user's own
    words, Caroline's line to a question about Melanie. Such a hit is less likely to hold the answer (search/relevance.py ``SPEAKER_OFFSET``)."""
    if not wanted or not speakers or len(speakers) != len(weights):
        return False
    top = max(weights) if weights else 0
    if top > 0:
        best = weights.index(top)  # the first line of the best weight
        return speakers[best] is not None and not _is(speakers[best], wanted)
    known = [s for s in speakers if s is not None]
    return bool(known) and not any(_is(s, wanted) for s in known)


__all__ = [
    "Speaker", "about_someone", "asked_names", "asked_speaker", "is_question", "line_name", "line_speakers", "markdown_speaker",
    "general_question", "name_counts", "other_speaker", "prefer", "session_content", "speaker_names",
]
