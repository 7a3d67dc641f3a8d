"""Timestamps and day buckets. Every function takes ``now`` explicitly so tests run on fixed clocks."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo


def ensure_aware(now: datetime | None) -> datetime:
    """``now`` as an aware datetime; naive values are taken as local time, None as the current time."""
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        return now.astimezone()
    return now


def to_iso(now: datetime) -> str:
    return ensure_aware(now).astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def day_bucket(now: datetime, tz: tzinfo | None) -> str:
    """``YYYY-MM-DD`` of ``now`` in the dreaming time zone (local time when none is configured)."""
    aware = ensure_aware(now)
    local = aware.astimezone(tz) if tz is not None else aware.astimezone()
    return local.date().isoformat()


def age_days(now: datetime, then: datetime | None) -> float:
    if then is None:
        return 0.0
    return max(0.0, (ensure_aware(now) - then).total_seconds() / 86400.0)
