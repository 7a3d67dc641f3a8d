"""The recall store: ``<workspace>/memory/.dreams/short-term-recall.json``.

Format (one entry per line, trailing newline)::

    {"version": 1, "updatedAt": ISO, "entries": {<key>: entry}, "promotedHashes": [<claimHash>, ...]}

Writers take ``short-term-recall.json.lock`` (see locking.py), re-read the file, change it and replace
it atomically, so concurrent recorders in several processes never lose a count and readers never see a
half-written file. Nothing is written when nothing changed.

The store is bounded by ``dreaming.maxEntries``. When over, entries are evicted in this order, so the
ones that matter (recalled more than once, recently, or waiting in review) go last:

1. promoted entries (their text hash stays in ``promotedHashes``, so nothing is lost);
2. entries with a single signal, least recently recalled first;
3. entries too old to be promoted (``maxAgeDays``), least recently recalled first;
4. everything else, lowest promotion score first.

A corrupt store file is moved aside (``.corrupt-<time>``) with a warning instead of failing searches.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from mdrecall.dreaming.clock import age_days, ensure_aware, from_iso, to_iso
from mdrecall.dreaming.config import DreamingConfig
from mdrecall.dreaming.entry import RecallEntry
from mdrecall.dreaming.locking import FileLock, atomic_write_text
from mdrecall.dreaming.paths import store_path
from mdrecall.dreaming.scoring import evaluate

log = logging.getLogger(__name__)

STORE_VERSION = 1
MAX_PROMOTED_HASHES = 20_000


class Entries(MutableMapping[str, RecallEntry]):
    """Recall entries by key, parsed from the file only when touched.

    Recording a search reads and rewrites the whole store but changes a handful of entries; entries
    never looked at are written back as the exact text they were read as, so a search costs a line
    split, not a parse and re-encode of every entry. Iterating (ranking, eviction) parses everything;
    an entry that fails to parse then is dropped with a warning.
    """

    def __init__(self, warnings: list[str] | None = None) -> None:
        self._raw: dict[str, str] = {}  # key -> the entry's JSON text as read
        self._live: dict[str, RecallEntry] = {}
        self._warnings = warnings if warnings is not None else []

    def _materialize(self, key: str) -> RecallEntry | None:
        text = self._raw.pop(key)
        try:
            entry = RecallEntry.from_json(json.loads(text))
        except (ValueError, TypeError) as exc:
            self._warnings.append(f"dropped malformed recall entry {key!r}: {exc}")
            return None
        if entry.key != key:
            self._warnings.append(f"dropped recall entry filed under {key!r} but keyed {entry.key!r}")
            return None
        self._live[key] = entry
        return entry

    def __getitem__(self, key: str) -> RecallEntry:
        if key in self._live:
            return self._live[key]
        if key in self._raw:
            entry = self._materialize(key)
            if entry is not None:
                return entry
        raise KeyError(key)

    def __setitem__(self, key: str, entry: RecallEntry) -> None:
        self._raw.pop(key, None)
        self._live[key] = entry

    def __delitem__(self, key: str) -> None:
        found = self._live.pop(key, None) is not None
        found = self._raw.pop(key, None) is not None or found
        if not found:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._live or key in self._raw

    def __len__(self) -> int:
        return len(self._live) + len(self._raw)

    def __iter__(self) -> Iterator[str]:
        for key in list(self._raw):
            self._materialize(key)
        return iter(list(self._live))

    def set_raw(self, key: str, text: str) -> None:
        self._live.pop(key, None)
        self._raw[key] = text

    def line_text(self, key: str) -> str:
        if key in self._raw:
            return self._raw[key]
        return json.dumps(self._live[key].to_json(), ensure_ascii=False)

    def all_keys(self) -> list[str]:
        return sorted([*self._raw, *self._live])


@dataclass
class StoreState:
    entries: Entries = field(default_factory=Entries)
    promoted_hashes: set[str] = field(default_factory=set)
    updated_at: str | None = None
    warnings: list[str] = field(default_factory=list)
    raw: str = ""  # the file text this state was read from

    def __post_init__(self) -> None:
        self.entries._warnings = self.warnings

    def serialize_body(self) -> str:
        """Everything after the header line: one entry per line (readable, diffable, cheap to rewrite)."""
        dump = json.dumps
        lines = [f"  {dump(key, ensure_ascii=False)}: {self.entries.line_text(key)}" for key in self.entries.all_keys()]
        return ",\n".join(lines) + f'\n}}, "promotedHashes": {dump(sorted(self.promoted_hashes))}}}\n'

    @staticmethod
    def header(updated_at: str | None) -> str:
        return f'{{"version": {STORE_VERSION}, "updatedAt": {json.dumps(updated_at)}, "entries": {{\n'

    def serialize(self, updated_at: str | None) -> str:
        return self.header(updated_at) + self.serialize_body()

    def find(self, ref: str) -> list[RecallEntry]:
        """Entries matching a full key, a text id (claim hash) or a unique prefix of either."""
        if ref in self.entries:
            return [self.entries[ref]]
        exact = [e for e in self.entries.values() if e.claim_hash == ref]
        if exact:
            return exact
        return [e for e in self.entries.values() if e.key.startswith(ref) or e.claim_hash.startswith(ref)]


_DECODER = json.JSONDecoder()
_FOOTER = '}, "promotedHashes": '


def _parse_lines(raw: str) -> StoreState | None:
    """The fast path for files in mdrecall's own one-entry-per-line layout; None for anything else."""
    lines = raw.split("\n")
    if len(lines) < 3 or not lines[0].endswith('"entries": {') or lines[-1] != "":
        return None
    footer = lines[-2]
    if not footer.startswith(_FOOTER):
        return None
    head = json.loads(lines[0] + "}}")
    hashes = json.loads("{" + footer[2:])["promotedHashes"]
    if head.get("version") != STORE_VERSION or not isinstance(hashes, list):
        return None
    state = StoreState(updated_at=head.get("updatedAt"), raw=raw)
    state.promoted_hashes = {h for h in hashes if isinstance(h, str)}
    for line in lines[1:-2]:
        key, end = _DECODER.raw_decode(line, 2)
        if not isinstance(key, str) or line[end : end + 2] != ": ":
            return None
        text = line[end + 2 :]
        state.entries.set_raw(key, text[:-1] if text.endswith(",") else text)
    return state


def _parse(raw: str, origin: Path) -> StoreState:
    try:
        fast = _parse_lines(raw)
    except (ValueError, KeyError, TypeError, IndexError):
        fast = None
    if fast is not None:
        return fast
    data = json.loads(raw)  # any other valid layout (hand-edited, pretty-printed)
    if not isinstance(data, dict):
        raise ValueError("top level is not an object")
    state = StoreState(updated_at=data.get("updatedAt"), raw=raw)
    entries = data.get("entries") or {}
    if not isinstance(entries, dict):
        raise ValueError("'entries' is not an object")
    for key, value in entries.items():
        try:
            entry = RecallEntry.from_json(value)
        except (ValueError, TypeError) as exc:
            state.warnings.append(f"{origin}: dropped malformed entry {key!r}: {exc}")
            continue
        state.entries[entry.key] = entry
    hashes = data.get("promotedHashes") or []
    if isinstance(hashes, list):
        state.promoted_hashes = {h for h in hashes if isinstance(h, str)}
    return state


class RecallStore:
    def __init__(self, workspace: Path | str, config: DreamingConfig | None = None, lock_timeout: float = 10.0) -> None:
        self.workspace = Path(workspace)
        self.config = config or DreamingConfig()
        self.path = store_path(self.workspace)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.lock_timeout = lock_timeout

    def exists(self) -> bool:
        return self.path.is_file()

    def load(self) -> StoreState:
        """A consistent snapshot without taking the lock (files are only ever replaced whole)."""
        return self._read(quarantine=False)

    def _read(self, *, quarantine: bool) -> StoreState:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return StoreState()
        try:
            state = _parse(raw, self.path)
        except (ValueError, TypeError) as exc:
            message = f"{self.path}: unreadable recall store ({exc}); starting a new one"
            if quarantine:
                aside = self.path.with_name(f"{self.path.name}.corrupt-{datetime.now():%Y%m%d-%H%M%S}")
                try:
                    os.replace(self.path, aside)
                    message += f" (old file kept as {aside.name})"
                except OSError:
                    pass
            log.warning(message)
            state = StoreState(warnings=[message])
        for warning in state.warnings:
            log.warning(warning)
        return state

    @contextmanager
    def update(self, now: datetime | None = None, *, dry_run: bool = False) -> Iterator[StoreState]:
        """Lock, load, let the caller change the state, then bound and save it if anything changed."""
        if dry_run:
            yield self.load()
            return
        with FileLock(self.lock_path, timeout=self.lock_timeout):
            state = self._read(quarantine=True)
            yield state
            evicted = enforce_bound(state, self.config, ensure_aware(now))
            if evicted:
                log.info("recall store over %d entries: evicted %d", self.config.maxEntries, evicted)
            # Unchanged content (same text with the old timestamp) is not rewritten.
            if state.raw or state.entries or state.promoted_hashes:
                body = state.serialize_body()
                if state.header(state.updated_at) + body != state.raw:
                    state.updated_at = to_iso(ensure_aware(now))
                    atomic_write_text(self.path, state.header(state.updated_at) + body)


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
    if len(state.promoted_hashes) > MAX_PROMOTED_HASHES:
        state.promoted_hashes = set(sorted(state.promoted_hashes)[-MAX_PROMOTED_HASHES:])
    return evicted
