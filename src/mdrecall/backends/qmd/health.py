"""Whether QMD may be asked now: consecutive failures and when QMD is tried again (never "never").

After a failure QMD is left alone for ``qmd.retryInitialMs``, doubling per consecutive failure up to
``qmd.retryMaxMs``; the first search (or ``status()``) after that tries it again, a fresh process.
One success resets the count. The reference gave up on QMD after its first error, for good.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any


def iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch, UTC).isoformat() if epoch else None


class Backoff:
    def __init__(self, initial_ms: int, max_ms: int) -> None:
        self.initial_s = initial_ms / 1000.0
        self.max_s = max_ms / 1000.0
        self.failures = 0
        self.last_error: str | None = None
        self.last_kind: str | None = None
        self.last_failure_at: float | None = None
        self.retry_at: float = 0.0  # wall clock

    def fail(self, kind: str, message: str) -> float:
        """Record a failure; seconds until QMD is tried again."""
        self.failures += 1
        self.last_kind, self.last_error = kind, message
        self.last_failure_at = time.time()
        delay = min(self.max_s, self.initial_s * 2 ** (self.failures - 1))
        self.retry_at = self.last_failure_at + delay
        return delay

    def succeed(self) -> None:
        self.failures = 0
        self.retry_at = 0.0

    def ready(self) -> bool:
        return time.time() >= self.retry_at

    def to_dict(self) -> dict[str, Any]:
        waiting = max(0.0, self.retry_at - time.time())
        return {
            "state": "backoff" if waiting > 0 else ("ok" if self.failures == 0 else "retrying"),
            "failures": self.failures,
            "lastError": self.last_error,
            "lastErrorKind": self.last_kind,
            "lastFailureAt": iso(self.last_failure_at),
            "retryAt": iso(self.retry_at) if self.failures else None,
            "retryInSeconds": round(waiting, 3) if self.failures else None,
        }
