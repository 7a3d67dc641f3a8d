"""Times for people (mdrecall/timefmt.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mdrecall.timefmt import shown

NOW = datetime(2026, 12, 1, 20, 30, tzinfo=UTC)


def test_local_to_the_second_and_how_long_ago() -> None:
    text = shown("2026-12-01T20:25:13.123456+00:00", now=NOW)
    local = datetime(2026, 12, 1, 20, 25, 13, tzinfo=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    assert text == f"{local} (4 min ago)" and ".123456" not in text
    assert shown(NOW - timedelta(days=2, hours=1), now=NOW).endswith("(2 days ago)")
    assert shown(NOW - timedelta(hours=3), now=NOW).endswith("(3 h ago)")
    assert shown(NOW, now=NOW).endswith("(just now)")


def test_missing_and_odd_values() -> None:
    assert shown(None) == "never" and shown("", none="–") == "–"
    assert shown("not a time") == "not a time"
