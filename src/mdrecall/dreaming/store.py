"""The recall store: ``<workspace>/memory/.dreams/short-term-recall.sqlite``.

One SQLite database (WAL) per workspace: a row per entry (``entries``: key, the entry as JSON),
the text hashes of promoted facts (``promoted``) and ``meta`` (``version``, ``updatedAt``). A
search's recording reads and writes only the entries it touches, so its cost does not grow with the
store (the JSON file it replaces was parsed and rewritten whole on every batch: 1 MB after ~500
searches, 12 ms of CPU a search, a 1.3 s flush; issue 12).

Writers take ``short-term-recall.sqlite.lock`` (see locking.py; a clear error after ``lock_timeout``)
and then one write transaction, so concurrent recorders in several processes never lose a count and
readers never see half a change. Nothing is written when nothing changed.

The store is bounded by ``dreaming.maxEntries``. When over, entries are evicted in this order, so the
ones that matter (recalled more than once, recently, or waiting in review) go last:

1. promoted entries (their text hash stays in ``promoted``, so nothing is lost);
2. entries with a single signal, least recently recalled first;
3. entries too old to be promoted (``maxAgeDays``), least recently recalled first;
4. everything else, lowest promotion score first.

A store written by earlier versions (``short-term-recall.json``) is imported on first use and kept
as ``short-term-recall.json.migrated``. A corrupt store is moved aside (``.corrupt-<time>``) with a
warning instead of failing searches.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, MutableMapping, MutableSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import apsw

from mdrecall.dreaming.clock import age_days, ensure_aware, from_iso, to_iso
from mdrecall.dreaming.config import DreamingConfig
from mdrecall.dreaming.entry import RecallEntry
from mdrecall.dreaming.locking import FileLock
from mdrecall.dreaming.paths import store_path as json_store_path
from mdrecall.dreaming.scoring import evaluate
from mdrecall.errors import StoreError
from mdrecall.store.sql import rows, scalar

log = logging.getLogger(__name__)

STORE_VERSION = 2  # 1: the JSON file
MAX_PROMOTED_HASHES = 20_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS promoted (hash TEXT PRIMARY KEY) WITHOUT ROWID;
"""
_DAMAGED = (apsw.CorruptError, apsw.NotADBError)


class Entries(MutableMapping[str, RecallEntry]):
    """Recall entries by key, read from the store only when touched.

    A search's recording touches a handful of entries: only those are read, parsed, and (if they
    changed) written back. Iterating (ranking, eviction) reads everything; an entry that fails to
    parse then is dropped with a warning.
    """

    def __init__(self, conn: apsw.Connection | None = None, warnings: list[str] | None = None) -> None:
        self._conn = conn
        self._live: dict[str, RecallEntry] = {}
        self._stored: dict[str, str] = {}  # key -> JSON as read, for entries in _live that exist in the store
        self._deleted: set[str] = set()
        self._missing: set[str] = set()  # looked up, not in the store
        self._all_loaded = conn is None
        self._warnings = warnings if warnings is not None else []

    # -- reading -------------------------------------------------------------------------------
    def _read(self, key: str) -> RecallEntry | None:
        if key in self._live:
            return self._live[key]
        if key in self._deleted or key in self._missing or self._all_loaded:
            return None
        assert self._conn is not None
        row = self._conn.execute("SELECT entry FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            self._missing.add(key)
            return None
        return self._materialize(key, row[0])

    def _materialize(self, key: str, text: str) -> RecallEntry | None:
        try:
            entry = RecallEntry.from_json(json.loads(text))
        except (ValueError, TypeError) as exc:
            self._warnings.append(f"dropped malformed recall entry {key!r}: {exc}")
            self._deleted.add(key)
            return None
        if entry.key != key:
            self._warnings.append(f"dropped recall entry filed under {key!r} but keyed {entry.key!r}")
            self._deleted.add(key)
            return None
        self._live[key] = entry
        self._stored[key] = text
        return entry

    def _load_all(self) -> None:
        if self._all_loaded:
            return
        assert self._conn is not None
        for key, text in rows(self._conn, "SELECT key, entry FROM entries"):
            if key not in self._live and key not in self._deleted:
                self._materialize(key, text)
        self._all_loaded = True

    def __getitem__(self, key: str) -> RecallEntry:
        entry = self._read(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._read(key) is not None

    def __iter__(self) -> Iterator[str]:
        self._load_all()
        return iter(list(self._live))

    def __len__(self) -> int:
        if self._all_loaded:
            return len(self._live)
        assert self._conn is not None
        stored = int(scalar(self._conn, "SELECT COUNT(*) FROM entries"))
        new = sum(1 for k in self._live if k not in self._stored)
        gone = sum(1 for k in self._deleted if k in self._stored or k not in self._live)
        return stored + new - gone

    def keys_with_prefix(self, prefix: str) -> list[str]:
        """Keys starting with ``prefix`` (one index range, not a full read)."""
        found: set[str] = {k for k in self._live if k.startswith(prefix)}
        if not self._all_loaded:
            assert self._conn is not None
            keys = rows(self._conn, "SELECT key FROM entries WHERE key >= ? AND key < ?", (prefix, prefix + "\U0010ffff"))
            found.update(k for (k,) in keys if k.startswith(prefix))
        return sorted(k for k in found if k not in self._deleted)

    def all_keys(self) -> list[str]:
        self._load_all()
        return sorted(self._live)

    # -- writing -------------------------------------------------------------------------------
    def __setitem__(self, key: str, entry: RecallEntry) -> None:
        self._deleted.discard(key)
        self._missing.discard(key)
        self._live[key] = entry

    def __delitem__(self, key: str) -> None:
        if self._read(key) is None:
            raise KeyError(key)
        self._live.pop(key, None)
        self._deleted.add(key)

    def changes(self) -> tuple[list[tuple[str, str]], list[str]]:
        """(entries to write: (key, JSON), keys to delete) against what the store holds."""
        writes = []
        for key, entry in self._live.items():
            text = json.dumps(entry.to_json(), ensure_ascii=False)
            if self._stored.get(key) != text:
                writes.append((key, text))
        return writes, sorted(self._deleted)


class PromotedHashes(MutableSet[str]):
    """Text hashes of promoted facts, looked up one by one (there may be 20,000)."""

    def __init__(self, conn: apsw.Connection | None = None) -> None:
        self._conn = conn
        self._added: set[str] = set()
        self._removed: set[str] = set()

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str) or value in self._removed:
            return False
        if value in self._added:
            return True
        return self._conn is not None and self._conn.execute("SELECT 1 FROM promoted WHERE hash = ?", (value,)).fetchone() is not None

    def _stored(self) -> set[str]:
        return {h for (h,) in self._conn.execute("SELECT hash FROM promoted")} if self._conn is not None else set()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted((self._stored() | self._added) - self._removed))

    def __len__(self) -> int:
        return len((self._stored() | self._added) - self._removed)

    def add(self, value: str) -> None:
        self._removed.discard(value)
        self._added.add(value)

    def discard(self, value: str) -> None:
        self._added.discard(value)
        self._removed.add(value)

    def update(self, values: Iterable[str]) -> None:
        for value in values:
            self.add(value)

    def changes(self) -> tuple[set[str], set[str]]:
        return set(self._added), set(self._removed)


@dataclass
class StoreState:
    entries: Entries = field(default_factory=Entries)
    promoted_hashes: PromotedHashes = field(default_factory=PromotedHashes)
    updated_at: str | None = None
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.entries._warnings = self.warnings

    def find(self, ref: str) -> list[RecallEntry]:
        """Entries matching a full key, a text id (claim hash) or a unique prefix of either."""
        if ref in self.entries:
            return [self.entries[ref]]
        exact = [e for e in self.entries.values() if e.claim_hash == ref]
        if exact:
            return exact
        return [e for e in self.entries.values() if e.key.startswith(ref) or e.claim_hash.startswith(ref)]


def _parse_json_store(raw: str, origin: Path) -> tuple[list[RecallEntry], set[str], list[str]]:
    """Entries and promoted hashes of a version-1 JSON store (any valid JSON layout)."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("top level is not an object")
    entries = data.get("entries") or {}
    if not isinstance(entries, dict):
        raise ValueError("'entries' is not an object")
    out, warnings = [], []
    for key, value in entries.items():
        try:
            entry = RecallEntry.from_json(value)
        except (ValueError, TypeError) as exc:
            warnings.append(f"{origin}: dropped malformed entry {key!r}: {exc}")
            continue
        out.append(entry)
    hashes = data.get("promotedHashes") or []
    return out, {h for h in hashes if isinstance(h, str)} if isinstance(hashes, list) else set(), warnings


class RecallStore:
    def __init__(
        self, workspace: Path | str, config: DreamingConfig | None = None, lock_timeout: float = 10.0, *, keep_open: bool = False
    ) -> None:
        self.workspace = Path(workspace)
        self.config = config or DreamingConfig()
        self.legacy_path = json_store_path(self.workspace)
        self.path = self.legacy_path.with_suffix(".sqlite")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.lock_timeout = lock_timeout
        #: Keep the connection between updates (the background recorder): closing the last
        #: connection folds the WAL back into the file, ~15 ms a time.
        self.keep_open = keep_open
        self._conn: apsw.Connection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def exists(self) -> bool:
        return self.path.is_file() or self.legacy_path.is_file()

    # -- connection ------------------------------------------------------------------------------
    def _open(self) -> apsw.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = apsw.Connection(str(self.path))
        conn.setbusytimeout(int(self.lock_timeout * 1000))
        if str(scalar(conn, "PRAGMA journal_mode=WAL")).lower() != "wal":
            raise StoreError(f"cannot switch {self.path} to WAL mode")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Deleted entries are overwritten, not left in free pages: forgetting a memory must not
        # leave its text in this file (the WAL is truncated after a forget: forget_paths).
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute(_SCHEMA)
        return conn

    def checkpoint(self) -> None:
        """Copy the WAL into the file and truncate it, so no old page image outlives a delete."""
        if not self.path.is_file():
            return
        with FileLock(self.lock_path, timeout=self.lock_timeout):
            conn = apsw.Connection(str(self.path))
            try:
                conn.setbusytimeout(int(self.lock_timeout * 1000))
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                conn.close()

    def _connect(self, warnings: list[str]) -> apsw.Connection:
        """Open the store (creating it; importing a JSON store; moving a corrupt file aside)."""
        try:
            conn = self._open()
            conn.execute("SELECT COUNT(*) FROM meta").fetchone()
        except _DAMAGED as exc:
            self._quarantine(f"unreadable recall store ({exc})", warnings)
            conn = self._open()
        except apsw.Error as exc:
            raise StoreError(f"cannot open the recall store {self.path}: {exc}") from exc
        if self.legacy_path.is_file():
            self._import_json(conn, warnings)
        return conn

    def _quarantine(self, reason: str, warnings: list[str]) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{datetime.now():%Y%m%d-%H%M%S}")
        message = f"{self.path}: {reason}; starting a new one"
        try:
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            message += f" (old file kept as {aside.name})"
        except OSError:
            pass
        log.warning(message)
        warnings.append(message)

    def _import_json(self, conn: apsw.Connection, warnings: list[str]) -> None:
        """Move a version-1 JSON store into this one (once; the file is kept, renamed)."""
        try:
            raw = self.legacy_path.read_text(encoding="utf-8")
            entries, hashes, dropped = _parse_json_store(raw, self.legacy_path)
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError) as exc:
            entries, hashes, dropped = [], set(), [f"{self.legacy_path}: unreadable recall store ({exc}); not imported"]
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO entries(key, entry) VALUES(?, ?)",
                [(e.key, json.dumps(e.to_json(), ensure_ascii=False)) for e in entries],
            )
            conn.executemany("INSERT OR IGNORE INTO promoted(hash) VALUES(?)", [(h,) for h in hashes])
        aside = self.legacy_path.with_name(self.legacy_path.name + ".migrated")
        try:
            os.replace(self.legacy_path, aside)
        except OSError:
            pass
        for message in dropped:
            log.warning(message)
        warnings.extend(dropped)
        log.info("recall store: imported %d entries from %s", len(entries), self.legacy_path.name)

    # -- reading and writing ---------------------------------------------------------------------
    def load(self) -> StoreState:
        """A consistent snapshot of every entry (read in one transaction, without the writer lock)."""
        warnings: list[str] = []
        if not self.exists():
            return StoreState(warnings=warnings)
        if self.legacy_path.is_file():
            with FileLock(self.lock_path, timeout=self.lock_timeout):
                conn = self._connect(warnings)
        else:
            conn = self._connect(warnings)
        try:
            with conn:  # one read transaction: a snapshot
                entries = Entries(conn, warnings)
                entries._load_all()
                hashes = PromotedHashes()
                hashes.update(h for (h,) in conn.execute("SELECT hash FROM promoted"))
                updated = conn.execute("SELECT value FROM meta WHERE key = 'updatedAt'").fetchone()
        finally:
            conn.close()
        entries._conn = None
        state = StoreState(entries, hashes, updated[0] if updated else None, warnings)
        for warning in warnings:
            log.warning(warning)
        return state

    @contextmanager
    def update(self, now: datetime | None = None, *, dry_run: bool = False) -> Iterator[StoreState]:
        """Lock, let the caller change the state, then bound and save it if anything changed."""
        if dry_run:
            yield self.load()
            return
        with FileLock(self.lock_path, timeout=self.lock_timeout):
            warnings: list[str] = []
            conn = self._conn if self._conn is not None and self.path.is_file() else self._connect(warnings)
            self._conn = None
            try:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except apsw.BusyError as exc:
                    raise StoreError(f"recall store {self.path} is locked by another mdrecall process") from exc
                try:
                    updated = conn.execute("SELECT value FROM meta WHERE key = 'updatedAt'").fetchone()
                    state = StoreState(Entries(conn, warnings), PromotedHashes(conn), updated[0] if updated else None, warnings)
                    for warning in warnings:
                        log.warning(warning)
                    yield state
                    evicted = enforce_bound(state, self.config, ensure_aware(now))
                    if evicted:
                        log.info("recall store over %d entries: evicted %d", self.config.maxEntries, evicted)
                    if _save(conn, state):
                        state.updated_at = to_iso(ensure_aware(now))
                        conn.execute(
                            "INSERT INTO meta(key, value) VALUES('updatedAt', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                            (state.updated_at,),
                        )
                        conn.execute(
                            "INSERT INTO meta(key, value) VALUES('version', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                            (str(STORE_VERSION),),
                        )
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except BaseException:
                conn.close()
                raise
            if self.keep_open:
                self._conn = conn
            else:
                conn.close()


def _save(conn: apsw.Connection, state: StoreState) -> bool:
    """Write what changed; True when anything did."""
    before = conn.total_changes()
    writes, deletes = state.entries.changes()
    added, removed = state.promoted_hashes.changes()
    conn.executemany("INSERT INTO entries(key, entry) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET entry = excluded.entry", writes)
    conn.executemany("DELETE FROM entries WHERE key = ?", [(k,) for k in deletes])
    conn.executemany("INSERT OR IGNORE INTO promoted(hash) VALUES(?)", [(h,) for h in sorted(added)])
    conn.executemany("DELETE FROM promoted WHERE hash = ?", [(h,) for h in sorted(removed)])
    if added and int(scalar(conn, "SELECT COUNT(*) FROM promoted")) > MAX_PROMOTED_HASHES:
        conn.execute(
            "DELETE FROM promoted WHERE hash NOT IN (SELECT hash FROM promoted ORDER BY hash DESC LIMIT ?)",
            (MAX_PROMOTED_HASHES,),
        )
    return conn.total_changes() > before


def _eviction_rank(entry: RecallEntry, now: datetime, cfg: DreamingConfig) -> tuple[int, float, str]:
    last = from_iso(entry.last_recalled_at)
    stamp = last.timestamp() if last else 0.0
    in_review = bool(entry.staged_at or entry.rejected_at)
    if entry.promoted_at:
        return (0, stamp, entry.key)
    if entry.signal_count <= 1 and not in_review:
        return (1, stamp, entry.key)
    if cfg.maxAgeDays >= 0 and age_days(now, last) > cfg.maxAgeDays and not in_review:
        return (2, stamp, entry.key)
    return (3, evaluate(entry, now, cfg).score, entry.key)


def enforce_bound(state: StoreState, cfg: DreamingConfig, now: datetime) -> int:
    """Evict down to ``maxEntries``; while at it, up to a tenth more from the expendable tiers (0-2), so
    a full store is not re-ranked on every search."""
    excess = len(state.entries) - cfg.maxEntries
    if excess <= 0:
        return 0
    ranked = sorted((_eviction_rank(e, now, cfg), e.key) for e in state.entries.values())
    slack = cfg.maxEntries // 10
    evicted = 0
    for rank, key in ranked:
        if evicted >= excess and (evicted >= excess + slack or rank[0] >= 3):
            break
        del state.entries[key]
        evicted += 1
    return evicted
