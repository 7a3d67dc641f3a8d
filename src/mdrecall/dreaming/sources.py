"""Short-term material that is not a file in the workspace, e.g. LanceDB long-term memories.

A plugin whose hits are cited ``<scheme>:<id>`` (LanceDB: ``ltm:<uuid>``) registers a reader for its
scheme through the ``register_recall_sources`` hook (:mod:`mdrecall.plugins`); recording and
promotion then treat such hits like daily-note facts: each search that surfaces one is counted, and
a frequently recalled one is staged in the review queue and written to MEMORY.md like any other
candidate. Found through the plugins, so ``mdrecall promote`` in a fresh process finds them too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from mdrecall import plugins
from mdrecall.dreaming.blocks import Block, normalize

log = logging.getLogger(__name__)

#: ``reader(workspace, path) -> text | None`` (see the ``register_recall_sources`` hookspec).
EntryReader = Callable[[Path, str], "str | None"]

_lock = threading.Lock()
_readers: dict[str, EntryReader] = {}
_generation = -1


def _current() -> dict[str, EntryReader]:
    global _readers, _generation
    current = plugins.generation()
    with _lock:
        if _generation != current:
            found: dict[str, EntryReader] = {}

            def register(scheme: str, reader: EntryReader) -> None:
                if not (scheme and scheme.isalnum() and len(scheme) > 1) or not callable(reader):
                    raise ValueError(f"invalid recall source registration {scheme!r}")
                found[scheme] = reader

            for _name, _ in plugins.call_each("register_recall_sources", register=register):
                pass
            _readers, _generation = found, current
        return _readers


def _scheme(path: str) -> str | None:
    head, sep, _ = path.partition(":")
    # "C:/..." and plain relative paths have no scheme of ours.
    return head if sep and len(head) > 1 and head.isalnum() else None


def reader_for(path: str) -> EntryReader | None:
    scheme = _scheme(path)
    return _current().get(scheme) if scheme is not None else None


def is_entry_path(path: str) -> bool:
    """Whether ``path`` cites an entry of a registered source (``ltm:<id>``)."""
    return reader_for(path) is not None


def read_entry_blocks(workspace: Path, path: str) -> list[Block] | None:
    """The entry as one block; ``[]`` when it no longer exists (nothing to record or promote); None
    when it is not an entry of a registered source or cannot be read right now."""
    reader = reader_for(path)
    if reader is None:
        return None
    try:
        text = reader(workspace, path)
    except Exception as exc:  # unreachable store: unreadable, never "deleted"
        log.warning("dreaming: cannot read %s: %s", path, exc)
        return None
    if text is None:
        return []
    return [Block(1, max(1, text.count("\n") + 1), normalize(text))]
