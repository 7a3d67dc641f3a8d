"""Dreaming's reader of ``ltm:<id>`` entries (registered by the plugin's ``register_recall_sources``).

Nothing here re-implements dreaming: with this reader, its own recording, scoring, review queue and
MEMORY.md writer handle entries like daily-note facts. Every search, ``memory_recall`` and
auto-recall that surfaces an entry counts as a recall; ``mdrecall promote --stage`` (or ``mdrecall
ltm promote --stage``) puts the ones that keep coming back into ``memory/.dreams/promotion-queue.md``;
``--apply`` writes the approved ones. A forgotten entry reads as None, so it is never promoted.
"""

from __future__ import annotations

from pathlib import Path

from mdrecall.backends.lancedb.results import CITATION_PREFIX, is_memory_id


def read_entry_text(workspace: Path, path: str) -> str | None:
    """The text of the entry ``ltm:<id>`` as it is now; None when it does not exist (forgotten,
    never stored, or another agent's). Raises when the table cannot be read."""
    memory_id = path[len(CITATION_PREFIX) :].split("#", 1)[0] if path.startswith(CITATION_PREFIX) else ""
    if not is_memory_id(memory_id):
        return None
    from mdrecall.backends.lancedb.manager import open_managers_for

    opened = open_managers_for(workspace)
    for manager in opened:  # the live table of a manager open on this workspace (the recording one)
        row = manager.get_entry(memory_id)
        if row is not None:
            return row.text
    if opened:
        return None
    # A fresh process (``mdrecall promote``): read the table the workspace's config names.
    from mdrecall.backends.lancedb import require_lancedb
    from mdrecall.backends.lancedb.store import LanceStore
    from mdrecall.config import load_config, mdrecall_home

    require_lancedb()
    settings = load_config(workspace).lancedb
    store = LanceStore(settings.db_uri(workspace, mdrecall_home()), storage_options=settings.storage_options(),
                       prefix=settings.tableName)  # fmt: skip
    for name in store.table_names():
        store.open_named(name)
        row = store.get(memory_id, settings.agentId)
        if row is not None:
            return row.text
    return None
