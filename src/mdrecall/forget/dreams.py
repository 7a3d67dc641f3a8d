"""Dreaming's copies in a forget: recall entries, review-queue candidates, and their old files.

A recall entry or a queued candidate goes when it comes from a chosen line (same file, overlapping
lines; any line of a whole file or entry) or when its text holds a forgotten text (line numbers
move as files are edited; the text does not). The queue is rewritten as promotion writes it (a
reviewer's edit made meanwhile is merged); the recall store's SQLite file is then scrubbed like an
index (``secure_delete``, ``VACUUM``, the write-ahead log truncated). Left-overs that hold old
entries are deleted: the JSON store a migration kept (``short-term-recall.json.migrated``) and
damaged copies moved aside (``.corrupt-*``).

``MEMORY.md`` is a memory file like the others: a promoted line is forgotten by naming it (or by text).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from mdrecall.config import MemoryConfig
from mdrecall.dreaming.locking import FileLock
from mdrecall.dreaming.paths import DREAMS_DIR, normalize_path, queue_path
from mdrecall.dreaming.promotion import read_queue_text, write_queue
from mdrecall.dreaming.store import RecallStore
from mdrecall.forget.index import Affected, scrub_sqlite

if TYPE_CHECKING:
    from mdrecall.forget.report import ForgetReport


def _key_path(key: str) -> str:
    # Keys are "<source>:<path>#<claim hash>" (an entry: "memory:ltm:<id>#..."): the path sits between
    # the first ":" and the last "#".
    return key.split(":", 1)[-1].rsplit("#", 1)[0]


class _Matcher:
    def __init__(self, affected: Affected, needles: Sequence[str]) -> None:
        self.affected = {normalize_path(p): lines for p, lines in affected.items()}
        self.needles = [n.casefold() for n in needles if n.strip()]

    def __call__(self, path: str, start: int, end: int, text: str) -> bool:
        rel = normalize_path(path)
        if rel in self.affected:
            lines = self.affected[rel]
            if lines is None or any(start <= n <= end for n in lines):
                return True
        folded = text.casefold()
        return any(n in folded for n in self.needles)


def _source_range(source: str) -> tuple[str, int, int]:
    """A queue item's ``source=path:start-end`` (an entry's is ``ltm:<id>:1-1``)."""
    path, _, span = source.rpartition(":")
    first, _, last = span.partition("-")
    try:
        return path, int(first), int(last or first)
    except ValueError:
        return source, 0, 0


def scrub_dreams(workspace: Path, config: MemoryConfig, affected: Affected, needles: Sequence[str], report: ForgetReport) -> None:
    store = RecallStore(workspace, config.dreaming)
    queue_file = queue_path(workspace)
    if not store.exists() and not queue_file.exists():
        return
    matches = _Matcher(affected, needles)
    recalls = report.store("recall store", str(store.path.relative_to(workspace)))
    queued = report.store("review queue", str(queue_file.relative_to(workspace))) if queue_file.exists() else None
    with store.update() as state:  # the store's lock keeps stage/apply off the queue meanwhile too
        for key in state.entries.all_keys():
            entry = state.entries[key]
            if matches(entry.path, entry.start_line, entry.end_line, f"{entry.heading or ''}\n{entry.snippet}"):
                del state.entries[key]
                recalls.add("entries", 1)
        queue, base = read_queue_text(workspace)
        kept = []
        for item in queue.items:
            path, start, end = _source_range(item.source)
            if matches(_key_path(item.key), start, end, item.text) or matches(path, start, end, item.text):
                if queued is not None:
                    queued.add("candidates", 1)
            else:
                kept.append(item)
        if len(kept) != len(queue.items):
            queue.items = kept
            write_queue(workspace, queue, base)
    if store.path.is_file():
        with FileLock(store.lock_path, timeout=store.lock_timeout):
            conn = apsw.Connection(str(store.path))
            try:
                conn.setbusytimeout(int(store.lock_timeout * 1000))
                recalls.notes.extend(scrub_sqlite(conn))
            finally:
                conn.close()
    leftovers = [store.legacy_path.with_name(store.legacy_path.name + ".migrated"),
                 *sorted((workspace / DREAMS_DIR).glob(f"{store.path.name}.corrupt-*"))]  # fmt: skip
    deleted = 0
    for old in leftovers:
        if old.is_file():
            old.unlink()
            deleted += not old.name.endswith(("-wal", "-shm"))
    recalls.add("old copies deleted", deleted)


def recalls_holding(workspace: Path, config: MemoryConfig, needle: str) -> int:
    """Recall entries and queued candidates whose text holds ``needle`` (casefolded), without a lock."""
    store = RecallStore(workspace, config.dreaming)
    count = 0
    if store.exists():
        count += sum(1 for e in store.load().entries.values() if needle in f"{e.heading or ''}\n{e.snippet}".casefold())
    queue, _base = read_queue_text(workspace)
    return count + sum(1 for item in queue.items if needle in item.text.casefold())

