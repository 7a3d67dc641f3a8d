"""Short-term material that is not a file in the workspace, e.g. LanceDB long-term memories.

A backend whose hits are cited ``<scheme>:<id>`` (LanceDB: ``ltm:<uuid>``) registers a reader for
its scheme; recording and promotion then treat such hits like daily-note facts: each search that
surfaces one is counted, and a frequently recalled one is staged in the review queue and written to
MEMORY.md like any other candidate. The reader returns the entry's text as blocks (``None`` when
the entry is gone, so a forgotten memory is never promoted).

Readers come from :func:`register_recall_source` or from the ``mdrecall.recall_sources`` entry-point
group (name = scheme), so ``mdrecall promote`` finds them in a fresh process.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from mdrecall.dreaming.blocks import Block

ENTRY_POINT_GROUP = "mdrecall.recall_sources"
SourceReader = Callable[[Path, str], "list[Block] | None"]

_READERS: dict[str, SourceReader] = {}
_entry_points_loaded = False


def register_recall_source(scheme: str, reader: SourceReader) -> None:
    _READERS[scheme] = reader


def _scheme(path: str) -> str | None:
    head, sep, _ = path.partition(":")
    # "C:/..." and plain relative paths have no scheme of ours.
    return head if sep and len(head) > 1 and head.isalnum() else None


def reader_for(path: str) -> SourceReader | None:
    global _entry_points_loaded
    scheme = _scheme(path)
    if scheme is None:
        return None
    if scheme not in _READERS and not _entry_points_loaded:
        _entry_points_loaded = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                _READERS.setdefault(ep.name, ep.load())
            except Exception:  # a broken plugin must not break recall tracking
                continue
    return _READERS.get(scheme)
