"""The promotion score: six weighted components in [0, 1], and the gates a candidate must pass.

With ``n = recallCount + dailyCount + groundedCount`` (signals), ``q`` distinct queries, ``d`` distinct
recall days, ``a`` days since the last recall and ``h`` the half-life (``recencyHalfLifeDays``)::

    frequency     = min(1, ln(1 + n) / ln 11)                      # 10 signals saturate
    relevance     = min(1, totalRelevance / n)                     # mean relative relevance, below
    diversity     = min(1, max(q, d) / 5)
    recency       = exp(-ln 2 / h * a)
    consolidation = max(C(days), min(1, groundedCount / 3))
        C = 0 (no day), 0.2 (one day), else min(1, 0.55 * min(1, ln(d) / ln 5) + 0.45 * min(1, span / 7))
        where span is the number of days from the first to the last recall day
    conceptual    = min(1, |conceptTags| / 6)

    score = 0.24 frequency + 0.30 relevance + 0.15 diversity + 0.15 recency
          + 0.10 consolidation + 0.06 conceptual

These are OpenClaw's formulas and weights (reference spec §10.3) with one change: relevance averages
each hit's score *relative to the best hit of the same search* (``score / top score``), not the raw
score. Raw scores depend on the embedding provider (MiniLM cosines, keyword-only BM25 mappings and
Gemini's 0.43-0.58 land in different ranges, issue #112693), so a threshold on them cannot be
calibrated once; the relative score means "how central was this fact to the question" with any
provider. The raw scores are still kept (``totalScore``, ``maxScore``) and shown.

Gates (all must hold): ``n >= minRecallCount``, ``q >= minUniqueQueries``, ``d >= minRecallDays``,
``a <= maxAgeDays`` (unless -1), ``score >= minScore``. The count gates carry the "recurring" meaning;
``minScore`` then drops recurring-but-weak or fading entries. See docs/dreaming.md for calibration.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime

from mdrecall.dreaming.clock import age_days, from_iso
from mdrecall.dreaming.config import DreamingConfig
from mdrecall.dreaming.entry import RecallEntry

WEIGHTS: dict[str, float] = {
    "frequency": 0.24,
    "relevance": 0.30,
    "diversity": 0.15,
    "recency": 0.15,
    "consolidation": 0.10,
    "conceptual": 0.06,
}


def clamp01(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def frequency(signals: int) -> float:
    return clamp01(math.log1p(max(0, signals)) / math.log(11))


def relevance(entry: RecallEntry) -> float:
    signals = max(1, entry.signal_count)
    total = entry.total_relevance if entry.total_relevance > 0 else entry.total_score
    return clamp01(total / signals)


def diversity(unique_queries: int, recall_days: int) -> float:
    return clamp01(max(unique_queries, recall_days) / 5)


def recency(age: float, half_life_days: float) -> float:
    return math.exp(-math.log(2) / half_life_days * max(0.0, age))


def day_consolidation(days: Iterable[str]) -> float:
    parsed = sorted({d for d in (_parse_day(x) for x in days) if d is not None})
    if not parsed:
        return 0.0
    if len(parsed) == 1:
        return 0.2
    spacing = clamp01(math.log(len(parsed)) / math.log(5))
    span = clamp01((parsed[-1] - parsed[0]).days / 7)
    return clamp01(0.55 * spacing + 0.45 * span)


def consolidation(entry: RecallEntry) -> float:
    return max(day_consolidation(entry.recall_days), clamp01(entry.grounded_count / 3))


def conceptual(tag_count: int) -> float:
    return clamp01(tag_count / 6)


def _parse_day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Components:
    frequency: float
    relevance: float
    diversity: float
    recency: float
    consolidation: float
    conceptual: float

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in WEIGHTS}

    def contributions(self) -> dict[str, float]:
        return {name: WEIGHTS[name] * value for name, value in self.as_dict().items()}

    @property
    def score(self) -> float:
        return clamp01(sum(self.contributions().values()))


def components(entry: RecallEntry, now: datetime, half_life_days: float) -> Components:
    age = age_days(now, from_iso(entry.last_recalled_at))
    return Components(
        frequency=frequency(entry.signal_count),
        relevance=relevance(entry),
        diversity=diversity(entry.unique_queries, len(entry.recall_days)),
        recency=recency(age, half_life_days),
        consolidation=consolidation(entry),
        conceptual=conceptual(len(entry.concept_tags)),
    )


@dataclass(slots=True)
class Evaluation:
    entry: RecallEntry
    components: Components
    score: float
    age_days: float
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, object]:
        e = self.entry
        return {
            "key": e.key,
            "id": e.claim_hash,
            "path": e.path,
            "source": e.source,
            "startLine": e.start_line,
            "endLine": e.end_line,
            "snippet": e.snippet,
            "heading": e.heading,
            "score": round(self.score, 4),
            "passed": self.passed,
            "failures": list(self.failures),
            "components": {k: round(v, 4) for k, v in self.components.as_dict().items()},
            "contributions": {k: round(v, 4) for k, v in self.components.contributions().items()},
            "recallCount": e.recall_count,
            "dailyCount": e.daily_count,
            "groundedCount": e.grounded_count,
            "uniqueQueries": e.unique_queries,
            "recallDays": list(e.recall_days),
            "conceptTags": list(e.concept_tags),
            "avgScore": round(e.total_score / max(1, e.signal_count), 4),
            "maxScore": round(e.max_score, 4),
            "ageDays": round(self.age_days, 2),
            "lastRecalledAt": e.last_recalled_at,
            "promotedAt": e.promoted_at,
            "stagedAt": e.staged_at,
            "rejectedAt": e.rejected_at,
        }


def evaluate(entry: RecallEntry, now: datetime, cfg: DreamingConfig) -> Evaluation:
    comps = components(entry, now, cfg.recencyHalfLifeDays)
    age = age_days(now, from_iso(entry.last_recalled_at))
    score = comps.score
    failures: list[str] = []
    if entry.promoted_at:
        failures.append(f"already promoted at {entry.promoted_at}")
    if entry.rejected_at:
        failures.append(f"rejected in review at {entry.rejected_at}")
    if entry.signal_count < cfg.minRecallCount:
        failures.append(f"recalls {entry.signal_count} < minRecallCount {cfg.minRecallCount}")
    if entry.unique_queries < cfg.minUniqueQueries:
        failures.append(f"distinct queries {entry.unique_queries} < minUniqueQueries {cfg.minUniqueQueries}")
    if len(entry.recall_days) < cfg.minRecallDays:
        failures.append(f"recall days {len(entry.recall_days)} < minRecallDays {cfg.minRecallDays}")
    if cfg.maxAgeDays >= 0 and age > cfg.maxAgeDays:
        failures.append(f"last recalled {age:.1f} days ago > maxAgeDays {cfg.maxAgeDays:g}")
    if score < cfg.minScore:
        failures.append(f"score {score:.3f} < minScore {cfg.minScore:g}")
    return Evaluation(entry, comps, score, age, failures)


def rank(
    entries: Iterable[RecallEntry], now: datetime, cfg: DreamingConfig, *, include_failing: bool = False
) -> list[Evaluation]:
    """Evaluations sorted by score, then recalls, then path; only passing ones unless asked."""
    evaluations = [evaluate(e, now, cfg) for e in entries]
    if not include_failing:
        evaluations = [ev for ev in evaluations if ev.passed]
    evaluations.sort(key=lambda ev: (-ev.score, -ev.entry.recall_count, ev.entry.path, ev.entry.key))
    return evaluations
