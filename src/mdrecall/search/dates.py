"""Dates in a query ("March 16, 2022", "2022-03-16", "last Tuesday", "yesterday", "in May") and the
daily notes they point at.

FTS sees only "16" and "2022" of "what did we decide on March 16, 2022?", so the note
``memory/2022-03-16.md`` did not win. Each date or period found in the query becomes a day range;
a dated note inside it gains ``boost`` in logit, a note within ``nearbyDays`` of it a share that
falls linearly with the distance. Relative dates count from the search's ``now``; a month or a
weekday without a year means the latest one not after ``now``.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from mdrecall.sources.workspace import note_date

_MONTHS = {
    name: i
    for i, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")],
        start=1,
    )
    for name in names
}
_WEEKDAYS = {d: i for i, d in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

_PATTERNS = [
    re.compile(r"\b(?P<year>(?:19|20)\d\d)[-/.](?P<mnum>[01]?\d)[-/.](?P<day>[0-3]?\d)\b"),
    re.compile(rf"\b{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?\b", re.IGNORECASE),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?\b", re.IGNORECASE),
    re.compile(r"\b(?P<mnum>[01]?\d)/(?P<day>[0-3]?\d)/(?P<year>(?:19|20)\d\d)\b"),
]
_MONTH_ONLY = re.compile(rf"\b(?:in|during|of|since|last|this)\s+{_MONTH}(?:\s+{_YEAR})?\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\s+{_YEAR}\b", re.IGNORECASE)
_WEEKDAY = re.compile(r"\b(?P<which>last|this|on|past)?\s*(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.IGNORECASE)
_AGO = re.compile(r"\b(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?P<unit>day|week|month)s?\s+ago\b", re.IGNORECASE)
_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def _month_range(year: int, month: int) -> tuple[date, date]:
    start = date(year, month, 1)
    end = date(year + (month == 12), month % 12 + 1, 1) - timedelta(days=1)
    return start, end


def _latest_month(month: int, today: date) -> int:
    return today.year if month <= today.month else today.year - 1


def query_dates(query: str, now: datetime) -> list[tuple[date, date]]:
    """Day ranges (inclusive) that the query names, most specific first."""
    today = now.date()
    found: list[tuple[date, date]] = []
    spans: list[tuple[int, int]] = []

    def taken(m: re.Match[str]) -> bool:
        return any(a < m.end() and m.start() < b for a, b in spans)

    for pattern in _PATTERNS:
        for m in pattern.finditer(query):
            if taken(m):
                continue
            parts = m.groupdict()
            month = int(parts["mnum"]) if parts.get("mnum") else _MONTHS[parts["month"].lower().rstrip(".")]
            try:
                day = int(parts["day"])
                year = int(parts["year"]) if parts.get("year") else None
                if year is None:
                    year = today.year
                    if date(year, month, day) > today:
                        year -= 1
                found.append((date(year, month, day),) * 2)
                spans.append((m.start(), m.end()))
            except ValueError:
                continue
    for pattern in (_MONTH_YEAR, _MONTH_ONLY):
        for m in pattern.finditer(query):
            if taken(m):
                continue
            month = _MONTHS[m.group("month").lower().rstrip(".")]
            if m.group("month").lower() == "may" and pattern is _MONTH_ONLY and not m.group("year"):
                # "may" is mostly the verb: only "in May" / "during May" / "since May" count.
                if not re.match(r"(?i)(in|during|since|of)\s", m.group(0)):
                    continue
            year = int(m.group("year")) if m.group("year") else _latest_month(month, today)
            found.append(_month_range(year, month))
            spans.append((m.start(), m.end()))
    low = query.lower()
    if re.search(r"\byesterday\b", low):
        found.append((today - timedelta(days=1),) * 2)
    if re.search(r"\btoday\b", low):
        found.append((today, today))
    if re.search(r"\blast week\b", low):
        found.append((today - timedelta(days=today.weekday() + 7), today - timedelta(days=today.weekday() + 1)))
    if re.search(r"\bthis week\b", low):
        found.append((today - timedelta(days=today.weekday()), today))
    if re.search(r"\blast month\b", low):
        first = today.replace(day=1)
        found.append(_month_range((first - timedelta(days=1)).year, (first - timedelta(days=1)).month))
    for m in _WEEKDAY.finditer(query):
        wd = _WEEKDAYS[m.group("wd").lower()]
        back = (today.weekday() - wd) % 7
        if m.group("which") and m.group("which").lower() in ("last", "past") and back == 0:
            back = 7
        found.append((today - timedelta(days=back),) * 2)
    for m in _AGO.finditer(query):
        raw = m.group("n").lower()
        n = _WORDS.get(raw) or int(raw)
        unit = m.group("unit").lower()
        days = n * {"day": 1, "week": 7, "month": 30}[unit]
        center = today - timedelta(days=days)
        slack = {"day": 0, "week": 3, "month": 10}[unit]
        found.append((center - timedelta(days=slack), center + timedelta(days=slack)))
    return found


def date_logit(path: str, source: str, ranges: list[tuple[date, date]], boost: float, nearby_days: int) -> float:
    """Logit added to a dated note's score: ``boost`` inside a named range, less nearby, else 0."""
    if source != "memory" or not ranges:
        return 0.0
    # Another agent's team note is cited as ``@agent/<its path>`` (Postgres backend): its path's date.
    day = note_date(path.partition("/")[2] if path.startswith("@") else path)
    if day is None:
        return 0.0
    best = 0.0
    for start, end in ranges:
        if start <= day <= end:
            return boost
        gap = (start - day).days if day < start else (day - end).days
        if nearby_days > 0 and gap <= nearby_days:
            best = max(best, boost * (1 - gap / (nearby_days + 1)))
    return best
