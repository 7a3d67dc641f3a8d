"""Compaction, full-text index refresh and version cleanup, off the write path.

Writes are counted; after ``maintenance.everyWrites`` of them, or ``afterSeconds`` after the first
one, a background thread runs :meth:`LanceStore.maintain`. ``close()`` runs what is still pending,
so a short-lived CLI process leaves a compact table behind too.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from mdrecall.backends.lancedb.settings import MaintenanceSettings

if TYPE_CHECKING:
    from mdrecall.backends.lancedb.store import LanceStore

log = logging.getLogger("mdrecall.lancedb")


class Maintainer:
    def __init__(self, store: LanceStore, settings: MaintenanceSettings) -> None:
        self.store = store
        self.cfg = settings
        self.pending = 0
        self.first_at = 0.0
        self.runs = 0
        self.last: dict[str, Any] | None = None
        self.last_error: str | None = None
        self.last_at: float | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def note_write(self, count: int = 1) -> None:
        if not self.cfg.enabled:
            return
        with self._cond:
            if not self.pending:
                self.first_at = time.monotonic()
            self.pending += count
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="mdrecall-ltm-maintenance", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _due_in(self) -> float | None:
        """Seconds until the next run is due; None when nothing is pending."""
        if not self.pending:
            return None
        if self.pending >= self.cfg.everyWrites:
            return 0.0
        return max(0.0, self.first_at + self.cfg.afterSeconds - time.monotonic())

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    due = self._due_in()
                    if due is not None and due <= 0:
                        break
                    self._cond.wait(due)
                if self._closed:
                    return
            self.run()

    def run(self) -> dict[str, Any] | None:
        with self._cond:
            self.pending = 0
        try:
            self.last = self.store.maintain(timedelta(minutes=self.cfg.keepVersionsMinutes))
            self.last_error = None
        except Exception as exc:  # maintenance is retried on the next writes; never fail a write for it
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("lancedb maintenance failed: %s", exc)
        self.runs += 1
        self.last_at = time.time()
        return self.last

    def status(self) -> dict[str, Any]:
        return {"enabled": self.cfg.enabled, "pendingWrites": self.pending, "runs": self.runs, "last": self.last,
                "lastError": self.last_error, "keepVersionsMinutes": self.cfg.keepVersionsMinutes}  # fmt: skip

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending = self.pending
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if pending and self.cfg.enabled:
            self.run()
