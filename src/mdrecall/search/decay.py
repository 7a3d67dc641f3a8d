"""Temporal decay for dated daily notes: ``score × exp(−ln2 / halfLifeDays × age_days)``.

Dates come from ``memory/**/YYYY-MM-DD[-slug].md`` names; ``MEMORY.md``, undated topic notes and
transcripts are evergreen. Age is measured from ``now`` (the search's as-of time), never negative.
Another agent's team note is cited as ``@agent/<its path>`` (the Postgres backend): its date is its
path's, so the team's dated notes decay like one's own.
"""

from __future__ import annotations

import math
from datetime import datetime

from mdrecall.sources.workspace import note_timestamp


def decay_multiplier(path: str, source: str, now: datetime, half_life_days: float) -> float:
    if source != "memory" or half_life_days <= 0:
        return 1.0
    if path.startswith("@"):
        path = path.partition("/")[2]
    stamp = note_timestamp(path)
    if stamp is None:
        return 1.0
    age_days = max(0.0, (now - stamp).total_seconds() / 86400.0)
    return math.exp(-math.log(2) / half_life_days * age_days)
