"""Long-term entries (LanceDB) in a forget: finding them, and deleting them physically.

The configured backend's table when ``backend: lancedb``; otherwise the LanceDB database this
workspace's config names (``lancedb.dbPath``) or its default folder, when one exists: a workspace
that used the backend once keeps its entries there. Deleting goes through
:meth:`mdrecall.backends.lancedb.store.LanceStore.purge` (fragments rewritten, full-text index
rebuilt, every older version removed), so no byte of an entry is left in the table's files.

LanceDB and PyArrow are imported only when such a store exists.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mdrecall import plugins
from mdrecall.forget.selection import FileSelection, SelectedLine, shown_text

if TYPE_CHECKING:
    from mdrecall.backends.lancedb.manager import LanceMemoryManager
    from mdrecall.backends.lancedb.store import LanceStore
    from mdrecall.contract import MemorySearchManager
    from mdrecall.forget.report import ForgetReport

PRIMARY = "primary"
PREFIX = "ltm:"


def _primary(manager: MemorySearchManager) -> LanceMemoryManager | None:
    if manager.backend != "lancedb":
        return None
    from mdrecall.backends.lancedb.manager import LanceMemoryManager

    return manager if isinstance(manager, LanceMemoryManager) else None


def secondary_uri(manager: MemorySearchManager) -> str | None:
    """The LanceDB database of this workspace when the backend is another one, if there is one."""
    if manager.backend == "lancedb":
        return None
    from mdrecall.config import mdrecall_home

    settings = manager.config.lancedb
    try:
        uri = settings.db_uri(manager.workspace, mdrecall_home())
    except Exception:  # an unset ${ENV} in dbPath: that store cannot be reached from here
        return None
    local = "://" not in uri or uri.startswith("file://")
    if local and not Path(uri.removeprefix("file://")).is_dir():
        return None
    if not local and not settings.dbPath:
        return None
    if importlib.util.find_spec("lancedb") is None:
        return None
    return uri


def local_folder(manager: MemorySearchManager) -> Path | None:
    """The LanceDB folder on this machine (for the byte scan), when the store is a local one."""
    primary = _primary(manager)
    uri = primary.db_uri if primary is not None else secondary_uri(manager)
    if uri is None or ("://" in uri and not uri.startswith("file://")):
        return None
    folder = Path(uri.removeprefix("file://"))
    return folder if folder.is_dir() else None


def _open(manager: MemorySearchManager, uri: str) -> LanceStore:
    from mdrecall.backends.lancedb.store import LanceStore

    settings = manager.config.lancedb
    return LanceStore(uri, storage_options=settings.storage_options(), prefix=settings.tableName)


def _tables(store: LanceStore) -> Iterator[str]:
    for name in store.table_names():
        store.open_named(name)
        yield name


def _selection(memory_id: str, text: str, store: str) -> FileSelection:
    return FileSelection(f"{PREFIX}{memory_id}", "ltm", [SelectedLine(1, shown_text(text), text)], whole=True, store=store)


def find_entry(manager: MemorySearchManager, memory_id: str) -> FileSelection | None:
    """The entry ``ltm:<memory_id>``, in the backend's table or the workspace's other LanceDB store."""
    primary = _primary(manager)
    if primary is not None:
        row = primary.get_entry(memory_id)
        return _selection(row.id, row.text, PRIMARY) if row is not None else None
    uri = secondary_uri(manager)
    if uri is None:
        return None
    store = _open(manager, uri)
    for _name in _tables(store):
        found = store.get(memory_id, manager.config.lancedb.agentId)
        if found is not None:
            return _selection(found.id, found.text, uri)
    return None


def find_entries_with(manager: MemorySearchManager, needle: str, warnings: list[str]) -> list[FileSelection]:
    """Every entry whose text holds ``needle`` (casefolded)."""
    primary = _primary(manager)
    try:
        if primary is not None:
            return [_selection(r.id, r.text, PRIMARY) for r in primary.list_entries() if needle in r.text.casefold()]
        uri = secondary_uri(manager)
        if uri is None:
            return []
        store = _open(manager, uri)
        out: dict[str, FileSelection] = {}
        for _name in _tables(store):
            for row in store.rows(manager.config.lancedb.agentId):
                if needle in row.text.casefold():
                    out.setdefault(row.id, _selection(row.id, row.text, uri))
        return list(out.values())
    except Exception as exc:  # a store that cannot be read must not hide the files' lines
        warnings.append(f"long-term memories (LanceDB) not searched: {type(exc).__name__}: {exc}")
        return []


def purge(manager: MemorySearchManager, selections: list[FileSelection], report: ForgetReport) -> None:
    """Delete the selected entries for good (every version, index and data file that held them)."""
    by_store: dict[str, list[str]] = {}
    for selection in selections:
        by_store.setdefault(selection.store or PRIMARY, []).append(selection.path[len(PREFIX) :])
    primary = _primary(manager)
    for where, ids in by_store.items():
        if where == PRIMARY and primary is not None:
            primary.count()  # opens the table
            _purge_in(primary.store, primary.db_uri, ids, report)
        else:
            store = _open(manager, where)
            for name in list(store.table_names()):
                store.open_named(name)
                _purge_in(store, f"{where} ({name})", [i for i in ids if store.get(i) is not None], report)
    # Other features' copies (a third party's): the same hook memory_forget fires.
    paths = [s.path for s in selections]
    for _name, _ in plugins.call_each("entries_forgotten", manager=manager, paths=paths):
        pass


def _purge_in(store: LanceStore, location: str, ids: list[str], report: ForgetReport) -> None:
    if not ids:
        return
    entry = report.store("lancedb", location)
    before = store.version_count()
    entry.add("entries", store.purge(ids))
    entry.notes.append(f"table compacted, {before} version(s) before, {store.version_count()} after")
