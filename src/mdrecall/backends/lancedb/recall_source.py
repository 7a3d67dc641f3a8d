"""Promotion for LanceDB users: frequently recalled entries proposed for MEMORY.md.

Nothing here re-implements dreaming. Entries are cited ``ltm:<id>``; :func:`read_entry_blocks` is
registered for that scheme (``mdrecall.recall_sources`` entry point, see dreaming/sources.py), so
dreaming's own recording, scoring, review queue and MEMORY.md writer handle them like daily-note
facts: every search, ``memory_recall`` and auto-recall that surfaces an entry counts as a recall;
``mdrecall promote --stage`` (or ``mdrecall ltm promote --stage``) puts the ones that keep coming
back into ``memory/.dreams/promotion-queue.md``; ``--apply`` writes the approved ones.

Forgetting an entry also removes it from the recall store and the review queue
(:func:`forget_recalls`), so its text does not survive there either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mdrecall.backends.lancedb.contract import CITATION_PREFIX, citation


def _entry_text(workspace: Path, memory_id: str) -> str | None:
    from mdrecall.backends.lancedb.manager import open_manager_for

    manager = open_manager_for(workspace)
    if manager is not None:
        row = manager.get_entry(memory_id)
        return row.text if row is not None else None
    # A fresh process (``mdrecall promote``): read the table the workspace's config names.
    from mdrecall.backends.lancedb.settings import load_settings
    from mdrecall.backends.lancedb.store import LanceStore
    from mdrecall.config import load_config

    config = load_config(workspace)
    settings = load_settings(config.lancedb)
    store = LanceStore(settings.db_uri(workspace), storage_options=settings.storage_options(), prefix=settings.tableName)
    for name in store.table_names():
        store.table, store.name = store.db.open_table(name), name
        row = store.get(memory_id, settings.agentId)
        if row is not None:
            return row.text
    return None


def read_entry_blocks(workspace: Path, path: str) -> list[Any] | None:
    """The entry ``ltm:<id>`` as one block, as dreaming reads a note.

    ``[]`` when the entry is gone (forgotten: nothing to record, nothing to promote); None when the
    table cannot be read right now.
    """
    from mdrecall.dreaming.blocks import Block, normalize

    memory_id = path[len(CITATION_PREFIX) :].split("#", 1)[0] if path.startswith(CITATION_PREFIX) else ""
    try:
        text = _entry_text(Path(workspace), memory_id) if memory_id else None
    except Exception:
        return None  # table unreachable: treat as unreadable, never as "deleted"
    if text is None:
        return []
    return [Block(1, max(1, text.count("\n") + 1), normalize(text))]


def forget_recalls(workspace: Path, config: Any, memory_ids: Sequence[str]) -> int:
    """Drop forgotten entries from the recall store and the review queue; returns entries removed."""
    from mdrecall.dreaming.config import dreaming_config
    from mdrecall.dreaming.locking import atomic_write_text
    from mdrecall.dreaming.paths import queue_path
    from mdrecall.dreaming.promotion import read_queue
    from mdrecall.dreaming.store import RecallStore

    cfg = dreaming_config(config)
    paths = {citation(i) for i in memory_ids}
    store = RecallStore(Path(workspace), cfg)
    if not store.exists() and not queue_path(Path(workspace)).exists():
        return 0
    removed = 0
    with store.update() as state:
        for key in list(state.entries.all_keys()):
            # Keys are "<source>:<path>#<claim>": the path is between the first ":" and the last "#".
            path = key.split(":", 1)[-1].rsplit("#", 1)[0]
            if path in paths:
                del state.entries[key]
                removed += 1
        queue = read_queue(Path(workspace))
        kept = [item for item in queue.items if item.key.split(":", 1)[-1].rsplit("#", 1)[0] not in paths]
        if len(kept) != len(queue.items):
            queue.items = kept
            atomic_write_text(queue_path(Path(workspace)), queue.render())
    return removed
