"""The review queue: ``memory/.dreams/promotion-queue.md``, a Markdown task list a person edits.

::

    - [ ] Infra: Postgres 16 runs on db-2, port 5433.
      <!-- mdrecall:candidate key=memory:memory/2026-03-02.md#3f2a9c01b7de source=memory/2026-03-02.md:14-15 score=0.612 recalls=4 queries=3 days=3 staged=3f2a9c01b7de -->

``[x]`` approves, ``[-]`` rejects, ``[ ]`` leaves it for later. The text after the box (and any
indented lines under it) is what will be written to MEMORY.md, so editing it changes the promotion;
``staged=`` is the hash of the text as staged, which tells an edit apart. Lines starting with ``>``
inside an item are notes from mdrecall and are ignored. Deleting an item only removes it from the
queue (it may be staged again later); reject it to keep it out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from mdrecall.dreaming.blocks import normalize, text_hash
from mdrecall.dreaming.contamination import CANDIDATE_MARKER

HEADER = """# Promotion queue

<!-- mdrecall:queue v1 -->

Facts from daily notes and transcripts that kept coming back in searches, waiting for review before
they go into MEMORY.md. For each one, change `[ ]` to `[x]` to approve it or to `[-]` to reject it, and
edit its text to change what gets written. Leave `[ ]` to decide later. Then run
`mdrecall promote --apply`. Why a fact is here: `mdrecall promote --explain <id>`.
"""
EMPTY_NOTE = "_Nothing waiting for review._"

_ITEM = re.compile(r"^- \[(.?)\]\s?(.*)$")
_MARKER = re.compile(r"<!--\s*" + re.escape(CANDIDATE_MARKER) + r"\s+(.*?)\s*-->")
_FIELD = re.compile(r"(\w+)=(\S+)")
_APPROVE = {"x", "X", "✓", "✔", "y", "Y", "+"}
_REJECT = {"-", "r", "R", "n", "N", "~"}


@dataclass
class QueueItem:
    key: str
    status: str  # "pending" | "approved" | "rejected"
    text: str
    source: str
    score: float = 0.0
    recalls: int = 0
    queries: int = 0
    days: int = 0
    staged_hash: str = ""
    notes: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.key.rsplit("#", 1)[-1]

    @property
    def edited(self) -> bool:
        return bool(self.staged_hash) and text_hash(self.text) != self.staged_hash

    def render(self) -> str:
        box = {"approved": "x", "rejected": "-"}.get(self.status, " ")
        lines = [f"- [{box}] {self.text}"]
        lines.extend(f"  > {note}" for note in self.notes)
        fields = (
            f"key={quote(self.key, safe=':/#._-~')} source={quote(self.source, safe=':/#._-~')} "
            f"score={self.score:.3f} recalls={self.recalls} queries={self.queries} days={self.days} "
            f"staged={self.staged_hash}"
        )
        lines.append(f"  <!-- {CANDIDATE_MARKER} {fields} -->")
        return "\n".join(lines)


@dataclass
class Queue:
    items: list[QueueItem]
    ignored: int = 0  # list items without a candidate marker (hand-written), left out

    def by_key(self) -> dict[str, QueueItem]:
        return {item.key: item for item in self.items}

    def render(self) -> str:
        body = "\n\n".join(item.render() for item in self.items) if self.items else EMPTY_NOTE
        return f"{HEADER}\n{body}\n"


def _status(box: str) -> str:
    if box in _APPROVE:
        return "approved"
    if box in _REJECT:
        return "rejected"
    return "pending"


def parse_queue(text: str) -> Queue:
    items: list[QueueItem] = []
    ignored = 0
    current: dict[str, Any] | None = None

    def finish() -> None:
        nonlocal current, ignored
        if current is None:
            return
        fields = current.get("fields")
        if not isinstance(fields, dict) or "key" not in fields:
            ignored += 1
        else:
            def num(name: str, kind: type[int] | type[float]) -> Any:
                try:
                    return kind(fields.get(name, 0))
                except (TypeError, ValueError):
                    return kind(0)

            items.append(
                QueueItem(
                    key=unquote(fields["key"]),
                    status=str(current["status"]),
                    text=normalize(" ".join(current["lines"])),
                    source=unquote(fields.get("source", "")),
                    score=float(num("score", float)),
                    recalls=int(num("recalls", int)),
                    queries=int(num("queries", int)),
                    days=int(num("days", int)),
                    staged_hash=fields.get("staged", ""),
                    notes=tuple(current["notes"]),
                )
            )
        current = None

    after_blank = False
    for line in text.split("\n"):
        match = _ITEM.match(line)
        if match:
            finish()
            current = {"status": _status(match.group(1)), "lines": [match.group(2)], "notes": [], "fields": None}
            after_blank = False
            continue
        if current is None:
            continue
        if not line.strip():
            after_blank = True
            continue
        indented = line[:1] in (" ", "\t")
        # A heading, or unindented text after a blank line, is no longer part of the item.
        if line.startswith("#") or (after_blank and not indented):
            finish()
            continue
        marker = _MARKER.search(line)
        if marker:
            current["fields"] = dict(_FIELD.findall(marker.group(1)))
            continue
        stripped = line.strip()
        if stripped.startswith(">"):
            current["notes"].append(stripped[1:].strip())
        else:
            current["lines"].append(stripped)
    finish()
    return Queue(items, ignored)
