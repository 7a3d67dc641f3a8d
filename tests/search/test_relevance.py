"""Absolute scores: a hit's score does not depend on the other hits, off-topic queries return
nothing (with a reason), and the scale is the same in every mode."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mdrecall import open_manager

NOTES = {
    "MEMORY.md": "# Memory\n\n- The team deploys the billing service with Terraform on Fridays.\n"
    "- Priya owns the Postgres migration to version 16.\n",
    "memory/2026-02-03.md": "# 2026-02-03\n\n- Priya moved the billing database to Fly Postgres; the old RDS cluster is read-only now.\n"
    "- We agreed to rotate the Stripe webhook secret monthly.\n",
    "memory/2026-02-10.md": "# 2026-02-10\n\n- Retro: the Terraform plan for the billing service drifted because of a manual hotfix.\n"
    "- Marco will write the runbook for failing over the billing database.\n",
    "memory/2026-02-17.md": "# 2026-02-17\n\n- Lunch order for the offsite: twelve vegetarian burritos from the place on Main Street.\n"
    "- The offsite is in Lisbon from March 4 to March 6.\n",
    "memory/people.md": "# People\n\n- Priya: backend, databases, on call in February.\n- Marco: SRE, runbooks, Terraform.\n",
}
OFF_TOPIC = [
    "What is the capital of Mongolia?",
    "asdfghjkl",
    "?!",
    "How do I bleed the brakes on a 2005 Toyota Corolla?",
    "What is the oxidation state of manganese in potassium permanganate?",
    "Who won the 1998 FIFA World Cup final?",
]
ON_TOPIC = {
    "Where did we move the billing database?": "memory/2026-02-03.md",
    "who writes the runbook for the billing database": "memory/2026-02-10.md",
    "when is the Lisbon offsite": "memory/2026-02-17.md",
}


# Everyday notes around the ones that matter, so that term statistics are those of a real memory
# (in a five-note workspace one more note moves every term's weight a lot).
_CHORES = ["watered the ferns", "renewed the parking permit", "booked the dentist", "paid the electricity bill",
           "fixed the squeaky door", "ordered printer paper", "called the landlord about the heating",
           "returned the library books", "cleaned the coffee machine", "updated the team calendar"]
FILLER = {
    f"memory/2026-01-{day:02d}.md": f"# 2026-01-{day:02d}\n\n- {_CHORES[day % 10]}.\n- {_CHORES[(day * 3) % 10]} again.\n"
    for day in range(1, 29)
}


@pytest.fixture
def team(make_ws: Callable[..., Path]) -> Path:
    return make_ws({**NOTES, **FILLER})


def test_off_topic_queries_return_nothing_and_say_why(team: Path, cfg: Callable[..., dict]) -> None:
    with open_manager(team, cfg()) as m:
        m.sync()
        for query in OFF_TOPIC:
            resp = m.search(query)
            assert resp.results == [], (query, [(r.citation, r.score) for r in resp.results])
            assert resp.reason in ("nothing relevant", "no candidates"), query
        for query, path in ON_TOPIC.items():
            resp = m.search(query)
            assert resp.results and resp.results[0].path == path, (query, [(r.citation, r.score) for r in resp.results])
            assert resp.reason is None


@pytest.mark.slow
def test_off_topic_queries_return_nothing_in_hybrid_mode(team: Path, cfg: Callable[..., dict], counting_provider) -> None:  # type: ignore[no-untyped-def]
    with open_manager(team, cfg(provider="counting")) as m:
        m.sync()
        for query in OFF_TOPIC:
            resp = m.search(query)
            assert resp.mode == "hybrid"
            assert resp.results == [], (query, [(r.citation, r.score) for r in resp.results])
        for query, path in ON_TOPIC.items():
            resp = m.search(query)
            assert resp.results and resp.results[0].path == path, query


def test_a_hits_score_does_not_move_when_a_better_unrelated_hit_is_added(team: Path, cfg: Callable[..., dict]) -> None:
    query = "Terraform plan drift for the billing service"
    with open_manager(team, cfg()) as m:
        m.sync()
        before = {r.path: r.score for r in m.search(query, min_score=0).results}
        (team / "memory" / "2026-02-24.md").write_text(
            "# 2026-02-24\n\n- The Terraform plan drift for the billing service is fixed: the billing service "
            "Terraform plan is clean again, no drift.\n",
            encoding="utf-8",
        )
        m.sync()
        after = {r.path: r.score for r in m.search(query, min_score=0).results}
    assert max(after, key=after.get) == "memory/2026-02-24.md"  # the new note is the better hit
    old = "memory/2026-02-10.md"
    # Rank-relative scores would have dropped (the best hit is no longer this one); calibrated ones
    # move only by the small change in term statistics one more note brings.
    assert after[old] == pytest.approx(before[old], abs=0.05)
    assert before[old] > 0.35


def test_min_score_filters_on_one_scale(team: Path, cfg: Callable[..., dict]) -> None:
    with open_manager(team, cfg()) as m:
        m.sync()
        every = m.search("billing database", min_score=0).results
        strict = m.search("billing database", min_score=0.9).results
    assert every and all(r.score >= 0.9 for r in strict)
    assert len(strict) < len(every)


def test_an_engine_without_corpus_statistics_still_gets_calibrated_scores() -> None:
    """rank_candidates with the candidate lists alone (CandidateCorpus): scores on the same scale,
    the matching candidate first, explained; candidates that do not hold the query's words are not
    relevant."""
    from datetime import UTC, datetime

    from mdrecall.config import MemoryConfig
    from mdrecall.search.keyword import Candidate
    from mdrecall.search.pipeline import SearchPlan, rank_candidates

    texts = [f"- {chore}." for chore in _CHORES] + ["- Priya moved the billing database to Fly Postgres."]
    keyword = [Candidate(i + 1, f"memory/n{i}.md", "memory", 1, 1, text, 1.0) for i, text in enumerate(texts)]
    config = MemoryConfig()
    plan = SearchPlan("where did Priya move the billing database", 10, 0.0, None, datetime(2026, 3, 1, tzinfo=UTC))
    out = rank_candidates(config, plan, keyword, [], "keyword-only", [], False)
    assert out.results[0].path == "memory/n10.md" and out.results[0].explanation is not None
    assert out.results[0].explanation["keyword"]["matched"] == ["priya", "move", "billing", "database"]
    assert all(0 <= r.score <= 1 for r in out.results) and out.results[0].score > 0.35 > out.results[-1].score
    strict = SearchPlan("the capital of Mongolia", 10, 0.35, None, plan.now)
    none = rank_candidates(config, strict, keyword, [], "keyword-only", [], False)
    assert none.results == [] and none.reason == "nothing relevant"
