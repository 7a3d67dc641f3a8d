"""Whose statement a question asks about, and which line of a hit is that speaker's.

An agent's memory of a conversation holds two kinds of lines: what the user said (their facts,
plans and preferences) and what the assistant replied (often long, and repeating the user's words
back). A question in the first person ("where do I keep my old sneakers?") asks about the user's
own statement; one that recalls the assistant's words ("the brand you mentioned", "the list you
provided") asks about a reply. Narrowing a hit to its best-matching line used to pick whichever
line repeated the question's words most, which is often the reply; here the line a citation keeps
is chosen among the asked speaker's lines first.

Only lines that say who spoke count: transcript messages (``User:`` / ``Assistant:``) and Markdown
lines written as ``- user: …`` / ``- assistant: …``. Notes that name people ("Caroline: …"), and
questions in the third person, have no preferred speaker: nothing changes for them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

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


def asked_speaker(query: str) -> Speaker | None:
    """Whose statement ``query`` asks about (None: it does not say)."""
    if _ASKS_ASSISTANT.search(query):
        return "assistant"
    if _FIRST_PERSON.search(_REQUEST.sub(" ", query)):
        return "user"
    return None


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


def prefer(weights: Sequence[float], speakers: Sequence[Speaker | None], wanted: Speaker | None) -> list[float]:
    """``weights`` (query-term weight per line) with the other speaker's lines set to 0 when a line
    of the wanted speaker matches at all; unchanged otherwise. Lines that do not say who spoke keep
    their weight: only a known other speaker gives way."""
    out = list(weights)
    if wanted is None or len(speakers) != len(out):
        return out
    if not any(w > 0 and s == wanted for w, s in zip(out, speakers)):
        return out
    return [0.0 if s is not None and s != wanted else w for w, s in zip(out, speakers)]


def other_speaker(weights: Sequence[float], speakers: Sequence[Speaker | None], wanted: Speaker | None) -> bool:
    """Whether the line a hit states its match on (its best-weighted line; every line when none
    matches) is the other known speaker's: an assistant's reply to a question about the user's own
    words, or the reverse. Such a hit is less likely to hold the answer (search/relevance.py
    ``SPEAKER_MODEL``)."""
    if wanted is None or not speakers or len(speakers) != len(weights):
        return False
    if weights and max(weights) > 0:
        best = max(range(len(weights)), key=lambda i: (weights[i], -i))
        return speakers[best] is not None and speakers[best] != wanted
    known = [s for s in speakers if s is not None]
    return bool(known) and all(s != wanted for s in known)


__all__ = ["Speaker", "asked_speaker", "line_speakers", "markdown_speaker", "other_speaker", "prefer"]
