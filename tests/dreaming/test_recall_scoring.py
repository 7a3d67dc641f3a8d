"""The six score components and the gates, against values computed by hand."""

from __future__ import annotations

import math

import pytest
from dreamhelpers import at

from mdrecall.dreaming.clock import to_iso
from mdrecall.dreaming.config import DreamingConfig
from mdrecall.dreaming.entry import RecallEntry
from mdrecall.dreaming.scoring import (
    WEIGHTS,
    components,
    consolidation,
    day_consolidation,
    diversity,
    evaluate,
    frequency,
    rank,
    recency,
    relevance,
)


def entry(**kw) -> RecallEntry:  # type: ignore[no-untyped-def]
    base = RecallEntry(key=kw.pop("key", "memory:memory/2026-03-02.md#aaaaaaaaaaaa"), path="memory/2026-03-02.md",
                       start_line=4, end_line=4, snippet="Postgres 16 runs on db-2, port 5433.",
                       claim_hash="aaaaaaaaaaaa")
    for k, v in kw.items():
        setattr(base, k, v)
    return base


def test_weights_are_the_issue_weights_and_sum_to_one() -> None:
    assert WEIGHTS == {"frequency": 0.24, "relevance": 0.30, "diversity": 0.15, "recency": 0.15,
                       "consolidation": 0.10, "conceptual": 0.06}
    assert sum(WEIGHTS.values()) == pytest.approx(1.0)


def test_component_formulas_by_hand() -> None:
    # frequency = ln(1+n)/ln(11): n=3 -> ln4/ln11 = 1.386294/2.397895
    assert frequency(3) == pytest.approx(0.578130, abs=1e-6)
    assert frequency(10) == 1.0 and frequency(50) == 1.0 and frequency(0) == 0.0
    assert diversity(3, 2) == pytest.approx(0.6) and diversity(1, 7) == 1.0
    # recency halves every half-life
    assert recency(0, 14) == 1.0
    assert recency(14, 14) == pytest.approx(0.5)
    assert recency(28, 14) == pytest.approx(0.25)
    # consolidation: 0 days 0, 1 day 0.2; 3 consecutive days: 0.55*ln3/ln5 + 0.45*2/7
    assert day_consolidation([]) == 0.0
    assert day_consolidation(["2026-03-02"]) == 0.2
    expected = 0.55 * math.log(3) / math.log(5) + 0.45 * 2 / 7
    assert day_consolidation(["2026-03-02", "2026-03-03", "2026-03-04"]) == pytest.approx(expected)
    assert expected == pytest.approx(0.504005, abs=1e-6)
    # 5 days spread over more than a week saturate both parts
    assert day_consolidation(["2026-03-01", "2026-03-03", "2026-03-05", "2026-03-07", "2026-03-09"]) == 1.0
    # three grounded reads count as full consolidation
    assert consolidation(entry(grounded_count=3, recall_days=["2026-03-02"])) == 1.0


def test_relevance_uses_relative_scores_and_falls_back_to_raw() -> None:
    assert relevance(entry(recall_count=4, total_relevance=3.0, total_score=1.2)) == pytest.approx(0.75)
    # An entry written without relative scores (an older store) uses the raw ones.
    assert relevance(entry(recall_count=2, total_score=1.5)) == pytest.approx(0.75)


def test_reference_worked_example_scores_0_739() -> None:
    """Reference §10.3: 3 recalls on 3 consecutive days, 3 queries, avg 0.9, 4 tags, age 0 -> 0.739."""
    now = at(days=2)
    e = entry(
        recall_count=3, total_relevance=2.7, total_score=2.7, max_score=0.95,
        query_hashes=["q1", "q2", "q3"], recall_days=["2026-03-02", "2026-03-03", "2026-03-04"],
        concept_tags=["postgres", "db-2", "port", "runs"], last_recalled_at=to_iso(now),
    )
    c = components(e, now, 14)
    assert c.frequency == pytest.approx(0.578, abs=1e-3)
    assert c.relevance == pytest.approx(0.9)
    assert c.diversity == pytest.approx(0.6)
    assert c.recency == pytest.approx(1.0)
    assert c.consolidation == pytest.approx(0.504, abs=1e-3)
    assert c.conceptual == pytest.approx(0.667, abs=1e-3)
    hand = 0.24 * 0.578130 + 0.30 * 0.9 + 0.15 * 0.6 + 0.15 * 1 + 0.10 * 0.504005 + 0.06 * 4 / 6
    assert hand == pytest.approx(0.739, abs=1e-3)
    assert c.score == pytest.approx(hand, abs=1e-6)
    # The reference's deep gate (0.8) is out of reach for this textbook recurring memory...
    assert c.score < 0.8
    # ...the calibrated default promotes it.
    assert evaluate(e, now, DreamingConfig()).passed


def test_gates_report_every_failure() -> None:
    now = at(days=40)
    e = entry(recall_count=1, total_relevance=1.0, query_hashes=["q1"], recall_days=["2026-03-02"],
              last_recalled_at=to_iso(at()))
    ev = evaluate(e, now, DreamingConfig())
    text = "; ".join(ev.failures)
    assert not ev.passed
    for part in ("minRecallCount 3", "minUniqueQueries 2", "minRecallDays 2", "maxAgeDays 30", "minScore"):
        assert part in text
    promoted = evaluate(entry(promoted_at=to_iso(now)), now, DreamingConfig())
    assert any("already promoted" in f for f in promoted.failures)
    # maxAgeDays -1 disables the age gate.
    assert not any("maxAgeDays" in f for f in evaluate(e, now, DreamingConfig(maxAgeDays=-1)).failures)


def test_rank_orders_by_score_then_recalls_then_path() -> None:
    now = at(days=5)
    days = ["2026-03-03", "2026-03-05", "2026-03-07"]
    strong = entry(key="k-strong", recall_count=6, total_relevance=6.0, query_hashes=list("abcdef"),
                   recall_days=days, last_recalled_at=to_iso(now))
    weak = entry(key="k-weak", recall_count=3, total_relevance=1.5, query_hashes=list("abc"),
                 recall_days=days, last_recalled_at=to_iso(now))
    once = entry(key="k-once", recall_count=1, total_relevance=1.0, query_hashes=["a"],
                 recall_days=days[:1], last_recalled_at=to_iso(now))
    ranked = rank([weak, once, strong], now, DreamingConfig(minScore=0))
    assert [ev.entry.key for ev in ranked] == ["k-strong", "k-weak"]
    everything = rank([weak, once, strong], now, DreamingConfig(minScore=0), include_failing=True)
    assert [ev.entry.key for ev in everything][-1] == "k-once"
