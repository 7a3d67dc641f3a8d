"""Times for people: ``2026-12-01 21:25:13 (4 min ago)`` in local time, not ``2026-12-01T20:25:13.123456+00:00``.

The JSON outputs (``--json``, the tools, ``to_dict()``) keep ISO 8601; only what a person reads (``mdrecall
status``, the web inspector) goes through :func:`shown`.
"""

from __future__ import annotations

from datetime import UTC, datetime


def _parse(value: str | datetime | float | None) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, int | float):
        moment = datetime.fromtimestamp(value, UTC)
    else:
        try:
            moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def ago(moment: datetime, now: datetime | None = None) -> str:
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    if seconds < 0:
        return "in the future"
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if unit == 'day' and count != 1 else ''} ago"
    return "just now"


def shown(value: str | datetime | float | None, *, none: str = "never", now: datetime | None = None) -> str:
    """A time as a person reads it: local, to the second, and how long ago; ``none`` when there is none
    (a value that is not a time is shown as it is)."""
    moment = _parse(value)
    if moment is None:
        return none if value in (None, "") else str(value)
    local = moment.astimezone()
    return f"{local.strftime('%Y-%m-%d %H:%M:%S')} ({ago(moment, now)})"


__all__ = ["ago", "shown"]
