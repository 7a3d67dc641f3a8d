"""``detect_category``: preference, decision, entity, fact or other, from cue words.

The seed's rules (tried in this order: preference, decision, entity, fact), made robust:

* whole words only: "this" is not a fact ("is"), "likewise" not a preference, "decidedly" not a
  decision; "like" counts only with a subject ("I like", "we don't like"), so "looks like" is not a
  preference;
* Chinese, Japanese and Korean cues (these scripts have no spaces, so their cues are substrings),
  plus the Czech cues of the reference.
"""

from __future__ import annotations

import re
from typing import Literal

MemoryCategory = Literal["preference", "fact", "decision", "entity", "other"]
CATEGORIES: tuple[MemoryCategory, ...] = ("preference", "fact", "decision", "entity", "other")

_SUBJECT = r"(?:i|we|you|they|he|she|my \w+|our \w+)"
_RULES: tuple[tuple[MemoryCategory, re.Pattern[str]], ...] = (
    (
        "preference",
        re.compile(
            r"\b(?:prefer(?:s|red|ring|ence|ences)?|love[sd]?|hate[sd]?|dislike[sd]?|want(?:s|ed)?|"
            r"favou?rite|rather|radši|preferuji|nechci)\b"
            rf"|\b{_SUBJECT}\s+(?:really\s+|also\s+|(?:do|does|did)(?:n'?t| not)\s+)?like[sd]?\b"
            r"|喜欢|喜歡|偏好|讨厌|討厭|宁愿|寧願|想要|好き|嫌い|好む|좋아|싫어|선호",
            re.IGNORECASE,
        ),
    ),
    (
        "decision",
        re.compile(
            r"\b(?:decided|decision|decide|agreed|chose|chosen|settled on|rozhodli|budeme)\b"
            r"|\b(?:will|'ll|shall|are going to|going to)\s+(?:use|go with|switch to|stick with|adopt)\b"
            r"|决定|決定|选定|選定|決めた|決めました|ことにした|ことにしました|결정|하기로",
            re.IGNORECASE,
        ),
    ),
    (
        "entity",
        re.compile(
            r"\+\d{10,}|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
            r"|\b(?:is called|are called|named|my name is|jmenuje se)\b"
            r"|我叫|名字是|叫做|と申します|といいます|名前は|이름은|라고 합니다",
            re.IGNORECASE,
        ),
    ),
    (
        "fact",
        re.compile(
            r"\b(?:is|are|was|were|has|have|had|je|má|jsou)\b"
            r"|是|有|在|です|である|がある|います|입니다|있습니다|이다|이에요|예요",
            re.IGNORECASE,
        ),
    ),
)


def detect_category(text: str) -> MemoryCategory:
    """The first category whose cue appears in ``text``; ``other`` when none does."""
    for category, pattern in _RULES:
        if pattern.search(text):
            return category
    return "other"


def parse_category(value: object) -> MemoryCategory:
    if value not in CATEGORIES:
        raise ValueError(f"category must be one of {', '.join(CATEGORIES)} (got {value!r})")
    return value
