"""Where long-term memory rows become the contract's records (``SearchHit``), and entry paths.

Citations: an entry's path is ``ltm:<id>``, its lines are its text's lines, and its citation is the
usual ``ltm:<id>#L1`` (``#L1-L3`` for a three-line memory), so ``memory_get`` reads it back and
dreaming tells it from a Markdown file. Hits have ``source: "memory"``: they are the long-term
memory corpus, so ``corpus: "memory"`` in ``memory_search`` keeps them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mdrecall.errors import PathError
from mdrecall.types import SearchHit, format_citation

if TYPE_CHECKING:
    from mdrecall.backends.lancedb.records import Row

CITATION_PREFIX = "ltm:"
SOURCE = "memory"
_UUID_CHARS = frozenset("0123456789abcdef-")


def is_memory_id(value: str) -> bool:
    """A UUID v4 as the store writes it (lowercase, dashed): the only ids a filter ever quotes."""
    return len(value) == 36 and set(value) <= _UUID_CHARS and value.count("-") == 4


def entry_path(memory_id: str) -> str:
    return f"{CITATION_PREFIX}{memory_id}"


def line_count(text: str) -> int:
    return max(1, text.count("\n") + 1)


def citation(memory_id: str, text: str) -> str:
    return format_citation(entry_path(memory_id), 1, line_count(text))


def parse_path(path: str) -> str:
    """The memory id in ``ltm:<id>`` (a trailing ``#L1`` or ``#L1-L3`` is accepted).

    PathError ``not_memory_path`` for anything that is not an entry (a Markdown path, ``../x``),
    ``invalid_path`` for an ``ltm:`` path that names no well-formed id."""
    text = (path or "").strip()
    if not text.startswith(CITATION_PREFIX):
        raise PathError(
            "not_memory_path", f"{path!r} is not a long-term memory; this backend reads entries cited as ltm:<id>"
        )
    memory_id = text[len(CITATION_PREFIX) :].split("#", 1)[0].strip()
    if not is_memory_id(memory_id):
        raise PathError("invalid_path", f"{path!r} names no memory id (ltm:<uuid>)")
    return memory_id


def search_hit(row: Row, score: float) -> SearchHit:
    return SearchHit(
        path=entry_path(row.id),
        start_line=1,
        end_line=line_count(row.text),
        score=round(float(score), 6),
        snippet=row.text,
        source=SOURCE,
        citation=citation(row.id, row.text),
        vector_score=row.score,
        text_score=None,
    )
