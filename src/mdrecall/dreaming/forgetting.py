"""Forgetting: entries a backend deleted for good leave dreaming too.

When ``memory_forget`` deletes an entry (the ``entries_forgotten`` hook, :mod:`mdrecall.dreaming.plugin`),
its recalls are dropped from the recall store and its candidates from the review queue, so its text
survives in neither and it can never be promoted. MEMORY.md is not touched: once promoted, a line is
the person's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.dreaming.paths import normalize_path, queue_path
from mdrecall.dreaming.promotion import read_queue_text, write_queue
from mdrecall.dreaming.store import RecallStore


def _key_path(key: str) -> str:
    # Keys are "<source>:<path>#<claim hash>": the path is between the first ":" and the last "#".
    return key.split(":", 1)[-1].rsplit("#", 1)[0]


def forget_paths(workspace: Path, config: MemoryConfig, paths: Iterable[str]) -> int:
    """Drop every recall of ``paths`` and their queued candidates; returns recall entries removed."""
    gone = {normalize_path(p).split("#", 1)[0] for p in paths}
    store = RecallStore(workspace, config.dreaming)
    if not gone or (not store.exists() and not queue_path(workspace).exists()):
        return 0
    removed = 0
    with store.update() as state:  # the store's lock also keeps stage/apply off the queue meanwhile
        for key in state.entries.all_keys():
            if _key_path(key) in gone:
                del state.entries[key]
                removed += 1
        queue, base = read_queue_text(workspace)
        kept = [item for item in queue.items if _key_path(item.key) not in gone]
        if len(kept) != len(queue.items):
            queue.items = kept
            write_queue(workspace, queue, base)  # as stage/apply write it: a reviewer's edit is merged
    if removed:
        store.checkpoint()  # the deleted rows were overwritten (secure_delete); the WAL goes too
    return removed
