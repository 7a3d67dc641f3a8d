"""Review outside an editor: one decision on one item of the promotion queue, and the promotion
history read back from MEMORY.md (what the web inspector shows and does).

A decision changes one queue item exactly as a person editing ``memory/.dreams/promotion-queue.md``
would: its box (``[x]`` approve, ``[-]`` reject, ``[ ]`` undecided) or its text. The queue is
parsed and rendered by :mod:`mdrecall.dreaming.queue`, the same code ``promote --stage/--apply`` use
(so, like them, it rewrites the file in its canonical form), and written under the recall store's
lock, which stage and apply hold while they rewrite the queue. Editors take no lock: the file is
written only if it still reads as it did when the decision started, and only if the item still reads
as the reviewer saw it (``seen``), so a concurrent edit is never overwritten or approved unseen; the
write itself is :func:`mdrecall.markdown_write.write_markdown`, so an edit landing between that last
check and the replace is merged in, not lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mdrecall.dreaming.blocks import normalize, text_hash
from mdrecall.dreaming.config import dreaming_config
from mdrecall.dreaming.contamination import PROMOTED_MARKER, is_contaminated
from mdrecall.dreaming.locking import FileLock
from mdrecall.dreaming.paths import queue_path
from mdrecall.dreaming.promotion import SECTION_TITLE
from mdrecall.dreaming.queue import QueueItem, parse_queue
from mdrecall.dreaming.store import RecallStore
from mdrecall.errors import MdrecallError
from mdrecall.markdown_write import read_markdown, write_markdown

Decision = Literal["approved", "rejected", "pending"]


class ReviewConflict(MdrecallError):
    """The queue or the item changed since it was shown; nothing was written."""


def decide(
    workspace: Path | str,
    key: str,
    *,
    status: Decision | None = None,
    text: str | None = None,
    seen: str | None = None,
    config: Any = None,
) -> QueueItem:
    """Set one queue item's status and/or text; returns the item as written.

    ``seen`` is :func:`text_hash` of the item's text as the reviewer read it; when given and the text
    differs now, :class:`ReviewConflict` is raised. ``text`` is what will be written to MEMORY.md.
    """
    workspace = Path(workspace)
    if status is None and text is None:
        raise ValueError("nothing to decide: give a status or a text")
    new_text = None
    if text is not None:
        new_text = normalize(text)
        if not new_text:
            raise ValueError("the text is empty; reject the item instead")
        if "<!--" in new_text or "-->" in new_text or is_contaminated(new_text):
            raise ValueError("the text may not contain HTML comments or mdrecall's own markers")
    path = queue_path(workspace)
    store = RecallStore(workspace, dreaming_config(config))
    with FileLock(store.lock_path, timeout=store.lock_timeout):
        raw = read_markdown(path)
        if raw is None:
            raise ReviewConflict("there is no promotion queue (yet): stage candidates first")
        queue = parse_queue(raw)
        item = queue.by_key().get(key)
        if item is None:
            raise ReviewConflict("that item is no longer in the queue (applied, removed or edited away); reload")
        if seen is not None and text_hash(item.text) != seen:
            raise ReviewConflict("the item's text changed since it was shown; reload and decide again")
        if status is not None:
            item.status = status
        if new_text is not None:
            item.text = new_text
        rendered = queue.render()
        if read_markdown(path) != raw:
            raise ReviewConflict("the queue file was edited meanwhile; nothing written, reload")
        if rendered != raw:
            # An edit landing between that check and the replace is merged in, not overwritten.
            write_markdown(path, rendered, base=raw)
    return item


# --- history ---------------------------------------------------------------------------------------------

_SECTION = re.compile(r"^##\s+" + re.escape(SECTION_TITLE) + r"\s+\((\d{4}-\d{2}-\d{2})\)\s*$")
_PROMOTED = re.compile(r"<!--\s*" + re.escape(PROMOTED_MARKER) + r"\s+(.*?)\s*-->")
_OPENCLAW = re.compile(r"<!--\s*openclaw-memory-promotion:(\S+)\s*-->")
_FIELD = re.compile(r"(\w+)=(\S+)")
_COMMENT = re.compile(r"\s*<!--.*?-->")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


@dataclass(frozen=True, slots=True)
class PromotedLine:
    """One fact promoted into MEMORY.md, as its marker records it."""

    line: int  # 1-based line in MEMORY.md
    text: str
    id: str
    day: str | None  # the date of the promotion section it sits in
    source: str = ""
    score: float | None = None
    recalls: int | None = None
    origin: str = "mdrecall"  # or "openclaw": a marker written by the original system

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text, "id": self.id, "day": self.day, "source": self.source,
                "score": self.score, "recalls": self.recalls, "origin": self.origin}


def _number(value: str | None, kind: type[int] | type[float]) -> Any:
    try:
        return kind(value) if value is not None else None
    except ValueError:
        return None


def promotion_history(memory_text: str) -> list[PromotedLine]:
    """Every promoted line of MEMORY.md, in file order (promotions append, so oldest first)."""
    out: list[PromotedLine] = []
    day: str | None = None
    for number, line in enumerate(memory_text.split("\n"), 1):
        if line.startswith("#"):
            section = _SECTION.match(line)
            day = section.group(1) if section else None
            continue
        marker = _PROMOTED.search(line)
        legacy = None if marker else _OPENCLAW.search(line)
        if not marker and not legacy:
            continue
        text = _BULLET.sub("", _COMMENT.sub("", line)).strip()
        if marker:
            fields = dict(_FIELD.findall(marker.group(1)))
            out.append(PromotedLine(number, text, fields.get("id", ""), day, fields.get("source", ""),
                                    _number(fields.get("score"), float), _number(fields.get("recalls"), int)))
        elif legacy:
            out.append(PromotedLine(number, text, legacy.group(1), day, origin="openclaw"))
    return out


__all__ = ["Decision", "PromotedLine", "ReviewConflict", "decide", "promotion_history"]
