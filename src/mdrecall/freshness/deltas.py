"""When a growing session transcript is worth re-indexing (OpenClaw's delta thresholds)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mdrecall.config import MemoryConfig
from mdrecall.sources.sessions import delta_reached

# Newline counting reads appended bytes in blocks of this size (as OpenClaw does).
_COUNT_BLOCK = 64 * 1024




@dataclass
class DeltaState:
    last_size: int = 0
    pending_bytes: int = 0
    pending_messages: int = 0


class SessionDeltaTracker:
    """Decides when a growing transcript is worth re-indexing (OpenClaw's delta thresholds).

    ``observe(path)`` is called on every change; it returns True when the file should be re-indexed
    now: it is new to the tracker, it shrank or vanished (rewritten or deleted), or the bytes or
    messages appended since the last re-index reach ``delta_bytes`` / ``delta_messages``. A threshold
    of 0 means "any growth". After a sync the manager calls :meth:`mark_indexed`.
    """

    def __init__(self, delta_bytes: int = 100_000, delta_messages: int = 50):
        self.delta_bytes = delta_bytes
        self.delta_messages = delta_messages
        self._state: dict[Path, DeltaState] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: MemoryConfig) -> SessionDeltaTracker:
        return cls(config.sync.sessions.deltaBytes, config.sync.sessions.deltaMessages)

    def prime(self, paths: Iterable[Path]) -> None:
        """Treat the current sizes as indexed (call right after a sync)."""
        for path in paths:
            self.mark_indexed(path)

    def mark_indexed(self, path: Path, size: int | None = None) -> None:
        if size is None:
            try:
                size = path.stat().st_size
            except OSError:
                self.forget(path)
                return
        with self._lock:
            self._state[path] = DeltaState(last_size=size)

    def forget(self, path: Path) -> None:
        with self._lock:
            self._state.pop(path, None)

    def pending(self) -> dict[Path, DeltaState]:
        with self._lock:
            return {p: DeltaState(s.last_size, s.pending_bytes, s.pending_messages) for p, s in self._state.items()}

    def pending_files(self) -> list[Path]:
        """Files with un-indexed appended data (below the thresholds); a search-time sync may flush them."""
        with self._lock:
            return sorted(p for p, s in self._state.items() if s.pending_bytes > 0)

    def _reached(self, state: DeltaState) -> bool:
        return delta_reached(self.delta_bytes, self.delta_messages, state.pending_bytes, state.pending_messages)

    def observe(self, path: Path) -> bool:
        try:
            size = path.stat().st_size
        except OSError:
            with self._lock:
                known = self._state.pop(path, None) is not None
            return known  # deleted: its rows must go
        with self._lock:
            state = self._state.get(path)
            if state is None:
                self._state[path] = DeltaState(last_size=size)
                return True  # a new transcript should become searchable now
            if size < state.last_size:
                self._state[path] = DeltaState(last_size=size)
                return True  # truncated or rewritten: the old rows are wrong
            if size == state.last_size:
                return False
            start = state.last_size
            state.last_size = size
            state.pending_bytes += size - start
            if state.pending_bytes < self.delta_bytes or self.delta_bytes <= 0:
                state.pending_messages += _count_newlines(path, start, size)
            if not self._reached(state):
                return False
            # The whole file is re-indexed, so nothing stays pending.
            state.pending_bytes = 0
            state.pending_messages = 0
            return True


def _count_newlines(path: Path, start: int, end: int) -> int:
    count = 0
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            remaining = end - start
            while remaining > 0:
                block = fh.read(min(_COUNT_BLOCK, remaining))
                if not block:
                    break
                count += block.count(b"\n")
                remaining -= len(block)
    except OSError:
        return 0
    return count
