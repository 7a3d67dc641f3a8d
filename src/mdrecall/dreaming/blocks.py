"""Facts inside a search hit: Markdown blocks, picking the ones a query was about, finding them again.

A search hit is a chunk of ~200 tokens that usually holds several unrelated facts. Counting recalls
per chunk would promote a whole chunk (one-off facts included) once any one fact in it recurs, so a
hit is narrowed to the block(s) the query shares words with: a list item (with its continuation lines),
a paragraph (long ones split into sentences), a table row or a transcript line. A hit that shares no
word with the query (a purely semantic match) is kept as a "passage" of all its blocks.

Blocks are identified by their normalised text, not their line numbers, so notes that grow during the
day do not split one fact's counts across keys; line numbers are kept as "last seen here".
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from mdrecall.text import CJK_CHAR, collapse_whitespace, query_terms, term_stems

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(.*)$")
_CHECKBOX = re.compile(r"^\[[ xX]\]\s+")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_ROLE = re.compile(r"^(?:User|Assistant):\s*")

# Paragraphs longer than this are split into sentences so one fact in a long paragraph is its own unit.
LONG_PARAGRAPH_CHARS = 400
# Headings that say nothing about the facts under them (a date, "Notes", ...), so not used as context.
_GENERIC_HEADING = re.compile(
    r"^(?:\d{4}-\d{2}-\d{2}.*|notes?|daily( notes?| log)?|log|journal|today|misc(ellaneous)?|summary|"
    r"tasks?|todos?|to-?do|done|inbox|scratch|updates?|general|other|random|thoughts|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day.*|session.*|morning|afternoon|evening)$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Block:
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str  # normalised: whitespace collapsed, list marker and checkbox removed
    heading: str | None = None  # nearest non-generic heading, or the parent item of a nested item
    group: str = ""  # the whole top-level list item with its sub-items (for contamination checks)


def normalize(text: str) -> str:
    return collapse_whitespace(text)


def text_hash(text: str) -> str:
    """Identity of a fact's text: sha1 of the normalised text, 12 hex digits."""
    return hashlib.sha1(normalize(text).encode("utf-8")).hexdigest()[:12]


def query_hash(query: str) -> str:
    return hashlib.sha1(normalize(query).lower().encode("utf-8")).hexdigest()[:12]


def _split_sentences(block: Block) -> list[Block]:
    if len(block.text) <= LONG_PARAGRAPH_CHARS:
        return [block]
    parts = [p.strip() for p in _SENTENCE_END.split(block.text) if p.strip()]
    return [Block(block.start_line, block.end_line, p, block.heading, block.group) for p in parts] or [block]


def _context(text: str, limit: int = 60) -> str:
    if len(text) <= limit:
        return text.rstrip(":")
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"


def markdown_blocks(text: str) -> list[Block]:
    """Split Markdown into fact-sized blocks with their line ranges and context.

    A nested list item is its own block, with its parent item as context ("Acme call: wants June 3");
    ``group`` keeps the whole top-level item so multi-line dreaming output is still recognised.
    """
    lines = text.split("\n")
    raw: list[tuple[Block, int]] = []  # (block, group id)
    heading: str | None = None
    current: list[str] = []
    start = 0
    kind = ""  # "item", "para", "fence"
    item_indent = 0
    stack: list[tuple[int, str]] = []  # open list items: (indent, text)
    group = 0

    def flush(end: int) -> None:
        nonlocal current, kind
        if current:
            if kind == "fence":
                raw.append((Block(start, end, normalize("\n".join(current)), heading), group))
            elif kind == "item":
                body = normalize(" ".join(current))
                while stack and stack[-1][0] >= item_indent:
                    stack.pop()
                context = _context(stack[-1][1]) if stack else heading
                if body:
                    raw.append((Block(start, end, body, context), group))
                stack.append((item_indent, body))
            else:
                body = normalize(" ".join(current))
                if body:
                    raw.extend((b, group) for b in _split_sentences(Block(start, end, body, heading)))
        current = []
        kind = ""

    def new_group() -> None:
        nonlocal group
        group += 1
        stack.clear()

    index = 0
    # YAML front matter is metadata, not facts.
    if lines and lines[0].strip() == "---":
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                index = j + 1
                break
    while index < len(lines):
        line = lines[index]
        number = index + 1
        index += 1
        if kind == "fence":
            current.append(line)
            if _FENCE.match(line):
                flush(number)
            continue
        if _FENCE.match(line):
            flush(number - 1)
            new_group()
            kind, start, current = "fence", number, [line]
            continue
        if not line.strip():
            flush(number - 1)
            continue
        match = _HEADING.match(line)
        if match:
            flush(number - 1)
            new_group()
            title = match.group(2).strip()
            heading = None if _GENERIC_HEADING.match(title) else title
            continue
        stripped = line.strip()
        if stripped.startswith("|"):
            flush(number - 1)
            new_group()
            if not _TABLE_SEPARATOR.match(stripped):
                cells = [c.strip() for c in stripped.strip("|").split("|")]
                row = " | ".join(c for c in cells if c)
                if row:
                    raw.append((Block(number, number, normalize(row), heading), group))
            continue
        match = _LIST_ITEM.match(line)
        if match:
            flush(number - 1)
            indent = len(match.group(1).expandtabs(4))
            if not stack or indent <= min(i for i, _ in stack):
                new_group()  # a top-level item starts a new group
            kind, start, item_indent = "item", number, indent
            current = [_CHECKBOX.sub("", match.group(2))]
            continue
        body = stripped[1:].strip() if stripped.startswith(">") else stripped
        if kind in ("item", "para"):
            current.append(body)  # continuation (indented or lazy) of the item or paragraph
        else:
            if line[:1] not in (" ", "\t"):
                new_group()
            kind, start, current = "para", number, [body]
    flush(len(lines))

    groups: dict[int, list[str]] = {}
    for block, gid in raw:
        groups.setdefault(gid, []).append(block.text)
    return [
        Block(b.start_line, b.end_line, b.text, b.heading, " ".join(groups[gid]) if len(groups[gid]) > 1 else b.text)
        for b, gid in raw
        if b.text
    ]


def transcript_blocks(lines: Sequence[str], line_numbers: Sequence[int]) -> list[Block]:
    """Rendered transcript lines (``User: …`` / ``Assistant: …``), one block each, cited by JSONL line."""
    return [
        Block(number, number, normalize(line), None, normalize(line))
        for line, number in zip(lines, line_numbers)
        if normalize(line)
    ]


def display_text(block_text: str) -> str:
    """The fact as a person should read it: transcript role prefixes removed."""
    return normalize(_ROLE.sub("", block_text))


def is_generic_heading(title: str) -> bool:
    return bool(_GENERIC_HEADING.match(title.strip()))


# --- narrowing a hit to the blocks a query was about -------------------------------------------------


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    # Cached: recording a search matches every block of every hit against the query, word by word.
    return term_stems([word])[0]


@lru_cache(maxsize=1024)
def _query_terms(query: str) -> tuple[str, ...]:
    return tuple(query_terms(query))


def _cjk_bigrams(token: str) -> set[str]:
    if len(token) == 1:
        return {token}
    return {token[i : i + 2] for i in range(len(token) - 1)}


@lru_cache(maxsize=1024)
def _match_keys(text: str) -> frozenset[str]:
    # Cached: recording a search matches the same live blocks (and the same query) again search
    # after search; 1,024 short texts are well under a megabyte.
    keys: set[str] = set()
    for token in _TOKEN.findall(text.lower()):
        if CJK_CHAR.match(token):
            # A CJK run mixed with Latin letters is split by script by the regex only partly; take bigrams.
            cjk = "".join(ch for ch in token if CJK_CHAR.match(ch))
            keys |= _cjk_bigrams(cjk)
            latin = "".join(ch if not CJK_CHAR.match(ch) else " " for ch in token).split()
            keys |= {_stem(w) for w in latin}
        else:
            keys.add(_stem(token))
    return frozenset(keys)


@lru_cache(maxsize=1024)
def _asked(query: str) -> tuple[tuple[str, bool], ...]:
    """The query's terms as :func:`overlap` tests them: each CJK term as it is (True), each other
    term as its stem (False)."""
    return tuple((t, True) if CJK_CHAR.match(t) else (_stem(t), False) for t in _query_terms(query))


class _Keys:
    """A text's match keys with the two lookups a term's test needs, each without a scan of every
    key: the keys in order (for a key that starts with the stem) and the set (for a key the stem
    starts with: one of its prefixes of 5+ characters). A term matches a key equal to it or, for
    stems of 5+ characters, a key of 5+ characters that it starts or that starts with it ("deploy" /
    "deployment", "postgres" / "postgresql"); recording asked that of every key, for every term of
    every block of every hit (tests/dreaming/test_fact_blocks.py compares the two)."""

    __slots__ = ("keys", "_ordered")

    def __init__(self, keys: frozenset[str]) -> None:
        self.keys = keys
        self._ordered: list[str] | None = None

    def has(self, term: str, cjk: bool) -> bool:
        keys = self.keys
        if cjk:
            return all(bigram in keys for bigram in _cjk_bigrams(term))
        if term in keys:
            return True
        if len(term) < 5:
            return False
        # stem.startswith(k), len(k) >= 5: k is one of the stem's prefixes of 5+ characters.
        if any(term[:end] in keys for end in range(5, len(term))):
            return True
        # k.startswith(stem): such keys sort from the stem on (and are 5+ characters, as it is).
        ordered = self._ordered
        if ordered is None:
            ordered = self._ordered = sorted(keys)
        at = bisect_left(ordered, term)
        return at < len(ordered) and ordered[at].startswith(term)


@lru_cache(maxsize=1024)
def _keys(text: str) -> _Keys:
    return _Keys(_match_keys(text))


def overlap(query: str, text: str) -> int:
    """How many of the query's search terms occur in ``text``."""
    keys = _keys(text)
    return sum(1 for term, cjk in _asked(query) if keys.has(term, cjk))


def blocks_in_range(blocks: Iterable[Block], start_line: int, end_line: int) -> list[Block]:
    return [b for b in blocks if b.start_line <= end_line and b.end_line >= start_line]


# --- finding a recorded fact again in the live note ----------------------------------------------------


def _similar(a: str, b: str) -> float:
    """Token Jaccard similarity of two normalised texts."""
    ta, tb = _match_keys(a), _match_keys(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


# A live block counts as "the same fact, edited" at this similarity (or when one contains the other
# and keeps most of it); below it the recorded text is treated as deleted.
EDIT_SIMILARITY = 0.6


@dataclass(frozen=True, slots=True)
class Located:
    status: str  # "exact" | "edited"
    blocks: tuple[Block, ...]

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks)

    @property
    def start_line(self) -> int:
        return min(b.start_line for b in self.blocks)

    @property
    def end_line(self) -> int:
        return max(b.end_line for b in self.blocks)

    @property
    def heading(self) -> str | None:
        return self.blocks[0].heading


def _locate_one(target: str, blocks: Sequence[Block], near_line: int) -> tuple[str, Block] | None:
    exact = [b for b in blocks if b.text == target]
    if exact:
        return "exact", min(exact, key=lambda b: abs(b.start_line - near_line))
    best: tuple[float, int, Block] | None = None
    for b in blocks:
        if target in b.text or b.text in target:
            shorter, longer = sorted((len(b.text), len(target)))
            quality = 1.0 if shorter / max(1, longer) >= 0.5 else 0.0
        else:
            quality = _similar(target, b.text)
        if quality < EDIT_SIMILARITY:
            continue
        rank = (quality, -abs(b.start_line - near_line), b)
        if best is None or rank[:2] > best[:2]:
            best = rank
    return ("edited", best[2]) if best else None


def locate(snippet: str, blocks: Sequence[Block], near_line: int) -> Located | None:
    """Find a recorded snippet (one block, or a passage of blocks joined by newlines) in live blocks.

    Returns None when the text is gone or changed beyond recognition: such text is never promoted.
    """
    targets = [t for t in snippet.split("\n") if t.strip()]
    if not targets:
        return None
    found: list[Block] = []
    status = "exact"
    line = near_line
    for target in targets:
        hit = _locate_one(normalize(target), blocks, line)
        if hit is None:
            return None
        if hit[0] != "exact":
            status = "edited"
        found.append(hit[1])
        line = hit[1].end_line + 1
    return Located(status, tuple(found))
