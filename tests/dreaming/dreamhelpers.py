"""Shared helpers for the dreaming tests: a fixed clock, SearchHit builders, a sample daily note."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mdrecall.types import SearchHit

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def at(days: float = 0, hours: float = 0) -> datetime:
    """A fixed clock: ``T0`` plus an offset."""
    return T0 + timedelta(days=days, hours=hours)


def hit(path: str, start: int, end: int, score: float = 0.8, snippet: str = "", source: str = "memory") -> SearchHit:
    return SearchHit(path=path, start_line=start, end_line=end, score=score, snippet=snippet, source=source,
                        citation=f"{path}#L{start}-L{end}")


DAILY = """# 2026-03-02

Standup at 9:30, nothing unusual.

## Infra
- Postgres 16 runs on db-2, port 5433.
- The staging cluster is called kestrel.

## Acme
- Acme wants the delivery by June 3; contact is Dana Whitfield.
- Budget for Acme is 40k EUR.
"""


def record_many(workspace: str, worker: int, count: int) -> int:
    """Multiprocessing worker: ``count`` recalls of the Postgres fact, each by a distinct query."""
    from pathlib import Path

    from mdrecall.dreaming import record_recalls

    recorded = 0
    for i in range(count):
        summary = record_recalls(
            Path(workspace), f"postgres port question {worker}-{i}", [hit("memory/2026-03-02.md", 1, 12, 0.9)],
            at(hours=i), config={"timezone": "UTC"},
        )
        recorded += summary.recorded
    return recorded
