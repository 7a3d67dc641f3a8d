"""Calibrated scores on the Postgres backend: the builtin's ranking over the team store's own corpus
statistics (backends/postgres/corpus.py). Off-topic questions come back empty with a reason, scores
agree with the builtin's over the same notes, and the statistics count only what the agent may see."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mdrecall import open_manager
from pghelpers import PgDatabase, pg_config

NOTES = {
    "MEMORY.md": "# Memory\n\n- The team deploys the billing service with Terraform on Fridays.\n"
    "- Priya owns the Postgres migration to version 16.\n",
    "memory/2026-02-03.md": "# 2026-02-03\n\n- Priya moved the billing database to Fly Postgres; the old RDS cluster is read-only now.\n"
    "- We agreed to rotate the Stripe webhook secret monthly.\n",
    "memory/2026-02-10.md": "# 2026-02-10\n\n- Retro: the Terraform plan for the billing service drifted because of a manual hotfix.\n"
    "- Marco will write the runbook for failing over the billing database.\n",
    "memory/2026-02-17.md": "# 2026-02-17\n\n- Lunch order for the offsite: twelve vegetarian burritos from the place on Main Street.\n"
    "- The offsite is in Lisbon from March 4 to March 6.\n",
}
_CHORES = ["watered the ferns", "renewed the parking permit", "booked the dentist", "paid the electricity bill",
           "fixed the squeaky door", "ordered printer paper", "called the landlord about the heating",
           "returned the library books", "cleaned the coffee machine", "updated the team calendar"]
FILLER = {
    f"memory/2026-01-{day:02d}.md": f"# 2026-01-{day:02d}\n\n- {_CHORES[day % 10]}.\n- {_CHORES[(day * 3) % 10]} again.\n"
    for day in range(1, 29)
}
OFF_TOPIC = ["What is the capital of Mongolia?", "How do I bleed the brakes on a 2005 Toyota Corolla?", "asdfghjkl"]
ON_TOPIC = {
    "Where did we move the billing database?": "memory/2026-02-03.md",
    "when is the Lisbon offsite": "memory/2026-02-17.md",
}


def _workspace(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def team_notes(tmp_path: Path) -> Path:
    return _workspace(tmp_path / "ws", {**NOTES, **FILLER})


def _scores(manager: Any, query: str) -> dict[str, float]:
    return {r.path: r.score for r in manager.search(query, min_score=0).results}


def test_off_topic_is_empty_with_a_reason_and_scores_match_the_builtin(
    team_notes: Path, tmp_path: Path, pg_db: PgDatabase, cfg: Callable[..., dict[str, Any]]
) -> None:
    dsn = pg_db.add_agent("mira", "pebble")
    with open_manager(team_notes, pg_config(dsn, "mira", "pebble"), use_global_config=False) as pg, \
            open_manager(team_notes, cfg(), use_global_config=False) as builtin:  # fmt: skip
        pg.sync()
        builtin.sync()
        for query in OFF_TOPIC:
            resp = pg.search(query)
            assert resp.results == [], (query, [(r.citation, r.score) for r in resp.results])
            assert resp.reason in ("nothing relevant", "no candidates"), query
        for query, path in ON_TOPIC.items():
            resp = pg.search(query)
            assert resp.results and resp.results[0].path == path and resp.reason is None, query
            details = resp.results[0].explanation
            assert details is not None and details["mode"] == "keyword-only"
            assert "billing" in details["keyword"]["matched"] or "lisbon" in details["keyword"]["matched"]
            # The same notes, the same statistics: the same probability, up to what each store's
            # text search counts as a term (Postgres also sees no heading trail in the text).
            ours, theirs = _scores(pg, query), _scores(builtin, query)
            assert ours[path] == pytest.approx(theirs[path], abs=0.02), query


def test_term_statistics_count_only_what_the_agent_may_see(tmp_path: Path, pg_db: PgDatabase) -> None:
    ana_dsn = pg_db.add_agent("ana", "ops")
    ben_dsn = pg_db.add_agent("ben", "ops")
    ana = _workspace(tmp_path / "ana", {"memory/notes.md": "# Notes\n\n- The zanzibar gateway is flaky.\n"})
    ben = _workspace(tmp_path / "ben", {"memory/private.md": "# Private\n\n- zanzibar zanzibar plans for a quokka.\n"})
    with open_manager(ben, pg_config(ben_dsn, "ben", "ops"), use_global_config=False) as m:
        m.sync()
    with open_manager(ana, pg_config(ana_dsn, "ana", "ops"), use_global_config=False) as m:
        m.sync()
        details = m.search("zanzibar quokka", min_score=0).results[0].explanation
        assert details is not None and details["keyword"]["missing"] == ["quokka"]  # ben's private word
    with psycopg.connect(ana_dsn, autocommit=True) as conn:
        total, dfs = conn.execute(
            "SELECT total, doc_freqs FROM mdrecall.term_statistics(current_user, %s, 'english', 100, true)",
            (["'zanzibar'", "'quokka'", "'the'"],),
        ).fetchone()
        assert total == 1 and dfs == [1, 0, -1]  # ben's private chunk is not counted; "the": a stop word
        # Acting as another role is refused: nothing is returned.
        assert conn.execute(
            "SELECT count(*) FROM mdrecall.term_statistics('postgres', %s, 'english', 100, true)", (["'quokka'"],)
        ).fetchone() == (0,)
