"""Auto-capture: which sentences of a finished turn become long-term memories.

Pure functions, no I/O. Per message of a captured role (``user`` only by default):

1. injected ``<relevant-memories>`` blocks are cut out (the host prepends them to the user's
   message; rejecting the whole message, as the reference does, makes capture never fire while
   auto-recall is on). An unclosed block drops the rest of the message;
2. the message is rejected whole when it looks like prompt injection (someone else's text pasted in
   to plant instructions), or like markup, code or a generated summary;
3. it is split into sentences; a sentence is a candidate when it states something (not a
   question), fits the length bounds, has at most 3 emoji, and carries a trigger cue: a preference,
   a decision, an identity or contact detail, an explicit "remember", "always"/"never" (built-in
   cues in English, Czech, German, French, Spanish, Chinese, Japanese and Korean, plus
   ``customTriggers``);
4. secrets are redacted (``mdrecall.sources.redact``), the category is detected, repeats are dropped, and
   at most ``maxCapturesPerTurn`` candidates are kept per turn (a turn starts at each user message),
   in conversation order.

Duplicates of memories already stored are dropped later, by the store's duplicate check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mdrecall.backends.lancedb.categories import MemoryCategory, detect_category
from mdrecall.sources.redact import redact_secrets
from mdrecall.text import count_cjk

_BLOCK = re.compile(r"<relevant-memories>.*?</relevant-memories>", re.IGNORECASE | re.DOTALL)
_BLOCK_OPEN = re.compile(r"<relevant-memories>", re.IGNORECASE)

INJECTION_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*(?:previous|above|prior|earlier|preceding|system|developer)?\s*(?:instructions|prompts?|rules|directives)\b",
        r"\bdo not follow (?:the )?(?:system|developer)\b",
        r"\bsystem prompt\b",
        r"\bdeveloper message\b",
        r"<\s*/?\s*(?:system|assistant|developer|tool|function|relevant-memories)\b",
        r"<\|(?:im_start|im_end|system|endoftext)\|>",
        r"\[/?(?:INST|SYS)\]",
        r"^\s*(?:please\s+)?(?:run|execute|call|invoke)\b.{0,40}\b(?:tool|command|function)s?\b",
        r"\byou (?:must|should|will|have to) (?:now )?(?:run|execute|call|invoke)\b.{0,40}\b(?:tool|command|function)s?\b",
        r"\b(?:you are now|from now on you are|act as (?:an? )?(?:unrestricted|jailbroken|dan)\b|jailbreak)",
        r"\bnew instructions\s*:",
        r"(?:忽略|无视|無視)(?:之前|以上|所有|前面)?的?(?:指令|指示|说明|提示)",
        r"(?:以前|前)の指示を無視",
        r"이전 지시(?:를|을)? 무시",
    )
)

# Cues that a sentence is worth keeping. Whole words in spaced scripts; substrings in CJK.
BUILTIN_TRIGGERS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # English: remember / preferences / decisions / identity / rules
        r"\b(?:remember|keep in mind|note that|don'?t forget)\b",
        r"\bprefer(?:s|red)?\b|\bfavou?rite\b|\bi'?d rather\b",
        r"\b(?:i|we)\s+(?:really\s+|also\s+|(?:do|don'?t|do not)\s+)?(?:like|love|hate|want|need|enjoy|dislike|avoid|use)\b",
        r"\b(?:decided|agreed on|agreed to|agreed that|settled on)\b|\b(?:i|we)(?:'ve| have)?\s+(?:agreed|chosen|chose)\b|\bdecision\b",
        r"\b(?:we|i)(?:'ll| will| shall| are going to| am going to)\s+(?:use|go with|switch|stick|adopt|move)\b",
        r"\blet'?s (?:use|go with|stick with|switch to)\b|\bfrom now on\b|\bgoing forward\b",
        r"\b(?:always|never)\b",
        r"\bmy\s+\w+(?:\s+\w+)?\s+(?:is|are|was)\b|\bis my\b|\bcall me\b|\bmy name\b",
        r"\bi(?:'m| am)\s+(?:a|an|allergic|vegetarian|vegan|based|from|married|left-handed|colou?r-?blind)\b",
        r"\bi (?:live|work|grew up)\s+(?:in|at|for|as)\b",
        r"\+\d{10,}|[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
        r"\bimportant\b",
        # Czech (the reference's own cues)
        r"zapamatuj si|pamatuj|preferuji|radši|nechci|rozhodli jsme|budeme používat|můj\s+\w+\s+je|je\s+můj",
        # German
        r"\b(?:merk dir|ich (?:mag|liebe|hasse|bevorzuge|will|möchte)|wir haben (?:uns )?entschieden|immer|niemals|mein(?:e)?\s+\w+\s+ist)\b",
        # French
        r"\b(?:retiens|souviens-toi|je (?:préfère|prefere|déteste|deteste|veux|aime|n'aime)|nous avons décidé|on a décidé|toujours|jamais|(?:mon|ma|mes)\s+\w+\s+(?:est|sont))\b",
        # Spanish
        r"\b(?:recuerda|prefiero|odio|quiero|me gusta|me encanta|decidimos|hemos decidido|siempre|nunca|mi\s+\w+\s+es)\b",
        # Chinese
        r"记住|記住|记得|記得|我(?:更|很|不|最)?喜欢|我(?:更|很|不|最)?喜歡|我讨厌|我討厭|我偏好|我(?:想要|需要)|(?:我们|我們|我)(?:已经|已經)?决定|決定了|以后|以後|总是|總是|从不|從不|永远不要|永遠不要|不要再|我的.{1,8}是|我叫|我是|我住在|我在.{1,10}工作",
        # Japanese
        r"覚えて|好き|嫌い|決めました|決めた|ことにし|いつも|絶対に|私の.{1,8}は|私は.{1,12}です|と申します|住んでいます",
        # Korean
        r"기억해|좋아해|좋아합니다|싫어|선호|결정했|하기로|항상|절대|제 이름은|내 이름은|저는.{1,12}입니다",
    )
)

_EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_QUESTION = re.compile(r"[?？]\s*$")
_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?>")
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Candidate:
    text: str
    category: MemoryCategory
    role: str
    message_index: int
    redacted: bool = False


@dataclass
class CapturePlan:
    candidates: list[Candidate] = field(default_factory=list)
    #: (text start, reason) for what was looked at and not kept; for status and tests.
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def skip(self, text: str, reason: str) -> None:
        self.skipped.append((text[:80], reason))


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: string content, or every ``{"type": "text"}`` block joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        ]
        return "\n".join(parts)
    return ""


def strip_injected(text: str) -> str:
    """``text`` without ``<relevant-memories>`` blocks; an unclosed block drops everything after it."""
    text = _BLOCK.sub(" ", text)
    opened = _BLOCK_OPEN.search(text)
    return text[: opened.start()] if opened else text


def looks_like_injection(text: str) -> bool:
    normal = " ".join(text.split())
    return any(p.search(normal) for p in INJECTION_PATTERNS)


def markup_reason(text: str) -> str | None:
    stripped = text.strip()
    if stripped.startswith("<") and "</" in stripped:
        return "markup"
    if len(_TAG.findall(stripped)) >= 2:
        return "markup"
    if "```" in stripped or re.search(r"^\s{4,}\S", stripped, re.MULTILINE) and "\n" in stripped:
        return "code"
    if "**" in stripped and "\n-" in stripped:
        return "generated summary"
    if re.search(r"^\s*#{1,6}\s", stripped, re.MULTILINE) and "\n" in stripped:
        return "generated summary"
    return None


def sentences(text: str) -> list[str]:
    return [s.strip(" \t-*•") for s in _SENTENCE_END.split(text) if s and s.strip(" \t-*•")]


def compile_triggers(custom: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    return BUILTIN_TRIGGERS + tuple(re.compile(p, re.IGNORECASE) for p in custom)


def sentence_reason(sentence: str, min_chars: int, max_chars: int, triggers: Sequence[re.Pattern[str]]) -> str | None:
    """Why a sentence is not a candidate, or None when it is one."""
    # A CJK character carries about as much as a short word: count it twice for the lower bound.
    if len(sentence) + count_cjk(sentence) < min_chars:
        return "too short"
    if len(sentence) > max_chars:
        return "too long"
    if _QUESTION.search(sentence):
        return "question"
    if len(_EMOJI.findall(sentence)) > 3:
        return "emoji"
    letters = len(_LETTER.findall(sentence))
    if letters < max(3, len(sentence) // 4):
        return "not prose"
    if not any(t.search(sentence) for t in triggers):
        return "no trigger"
    return None


def normalized_key(text: str) -> str:
    """What makes two memories the same text: case, spacing and punctuation ignored."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def plan_capture(
    messages: Sequence[object],
    *,
    roles: Sequence[str] = ("user",),
    min_chars: int = 10,
    max_chars: int = 500,
    max_captures: int = 3,
    custom_triggers: Sequence[str] = (),
) -> CapturePlan:
    """The memories one finished turn yields (see the module docstring for the rules)."""
    plan = CapturePlan()
    triggers = compile_triggers(custom_triggers)
    seen: set[str] = set()
    # A turn starts at each user message: a whole conversation passed at once (``ltm capture``)
    # gets the per-turn limit for each of its turns, not once.
    turn, taken = 0, 0
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = str(message.get("role", ""))
        if role == "user":
            turn, taken = turn + 1, 0
        if role not in roles:
            continue
        raw = message_text(message)
        text = strip_injected(raw).strip()
        if not text:
            continue
        if looks_like_injection(text):
            plan.skip(text, "prompt injection")
            continue
        reason = markup_reason(text)
        if reason:
            plan.skip(text, reason)
            continue
        for sentence in sentences(text):
            reason = sentence_reason(sentence, min_chars, max_chars, triggers)
            if reason:
                plan.skip(sentence, reason)
                continue
            clean = redact_secrets(sentence)
            key = normalized_key(clean)
            if key in seen:
                plan.skip(sentence, "repeated in this turn")
                continue
            seen.add(key)
            if taken >= max_captures:
                plan.skip(sentence, "turn limit")
                continue
            taken += 1
            plan.candidates.append(Candidate(clean, detect_category(clean), role, index, clean != sentence))
    return plan
