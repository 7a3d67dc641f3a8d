"""Temporal decay: recent dated notes outrank older equal ones as of a given time; evergreen files and
the only answer survive."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mdrecall import open_manager
from mdrecall.search.decay import decay_multiplier

BODY = "- The zebra enclosure needs repainting before the spring visitors arrive.\n"
UTC = UTC
DECAY = {"temporalDecay": {"enabled": True}}  # opt-in


def test_multiplier_formula() -> None:
    now = datetime(2026, 3, 31, tzinfo=UTC)
    assert decay_multiplier("memory/2026-03-01.md", "memory", now, 30) == pytest.approx(0.5)
    assert decay_multiplier("memory/2026-01-30.md", "memory", now, 30) == pytest.approx(0.25)
    assert decay_multiplier("memory/2026-03-01.md", "memory", now, 60) == pytest.approx(math.sqrt(0.5))
    assert decay_multiplier("memory/2026-04-30.md", "memory", now, 30) == 1.0  # after as-of: never boosted
    assert decay_multiplier("MEMORY.md", "memory", now, 30) == 1.0
    assert decay_multiplier("memory/people.md", "memory", now, 30) == 1.0
    assert decay_multiplier("memory/2020-01-01.md", "sessions", now, 30) == 1.0
    # Another agent's team note (the Postgres backend's "@agent/path" citations) decays by its own path.
    assert decay_multiplier("@bob/memory/2026-03-01.md", "memory", now, 30) == pytest.approx(0.5)
    assert decay_multiplier("@bob/MEMORY.md", "memory", now, 30) == 1.0


@pytest.fixture
def dated(make_ws: Callable[..., Path], cfg: Callable[..., dict]):  # type: ignore[no-untyped-def]
    ws = make_ws({"memory/2026-01-01.md": BODY, "memory/2026-03-01.md": BODY, "memory/2024-05-05.md": "- A zeppelin flew over the office.\n"})
    with open_manager(ws, cfg(query=DECAY)) as m:
        yield m


def _scores(resp) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {r.path: r.score for r in resp.results}


def test_recent_note_outranks_older_equal_one(dated) -> None:  # type: ignore[no-untyped-def]
    resp = dated.search("zebra enclosure repainting", now=datetime(2026, 3, 2, tzinfo=UTC), min_score=0)
    assert [r.path for r in resp.results] == ["memory/2026-03-01.md", "memory/2026-01-01.md"]
    scores = _scores(resp)
    # Scores are calibrated relevance times the decay: the twins' relevance is the same.
    base = _scores(dated.search("zebra enclosure repainting", now=datetime(2026, 3, 1, tzinfo=UTC), min_score=0))
    relevance = base["memory/2026-03-01.md"]
    assert scores["memory/2026-03-01.md"] == pytest.approx(relevance * 2 ** (-1 / 30), abs=1e-4)
    assert scores["memory/2026-01-01.md"] == pytest.approx(relevance * 2 ** (-60 / 30), abs=1e-4)
    # A minScore between the two drops the decayed twin, since a better answer exists.
    cut = relevance * 0.5
    assert [r.path for r in dated.search("zebra enclosure repainting", now=datetime(2026, 3, 2, tzinfo=UTC), min_score=cut)] == ["memory/2026-03-01.md"]


def test_as_of_time_changes_the_answer(dated) -> None:  # type: ignore[no-untyped-def]
    early = _scores(dated.search("zebra enclosure", now=datetime(2026, 1, 2, tzinfo=UTC), min_score=0))
    late = _scores(dated.search("zebra enclosure", now=datetime(2026, 7, 1, tzinfo=UTC), min_score=0))
    assert early["memory/2026-01-01.md"] > 0.97 * early["memory/2026-03-01.md"]  # the later one is not yet decayed
    assert late["memory/2026-01-01.md"] < 0.05 * early["memory/2026-01-01.md"]
    # A naive datetime is taken as UTC rather than rejected.
    naive = _scores(dated.search("zebra enclosure", now=datetime(2026, 1, 2), min_score=0))
    assert naive == pytest.approx(early)


def test_old_note_that_is_the_only_answer_still_comes_back(dated) -> None:  # type: ignore[no-untyped-def]
    resp = dated.search("zeppelin", now=datetime(2026, 6, 1, tzinfo=UTC))
    assert [r.path for r in resp.results] == ["memory/2024-05-05.md"]
    assert 0 <= resp.results[0].score < 0.05  # decayed far below minScore, yet not hidden


def test_evergreen_files_are_not_decayed(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({"MEMORY.md": BODY, "memory/topic.md": BODY, "memory/2025-01-01.md": BODY})
    with open_manager(ws, cfg(query=DECAY)) as m:
        scores = _scores(m.search("zebra enclosure", now=datetime(2026, 6, 1, tzinfo=UTC), min_score=0))
    assert scores["MEMORY.md"] == pytest.approx(scores["memory/topic.md"])  # same text, same relevance, undecayed
    assert scores["memory/2025-01-01.md"] < 0.01 * scores["MEMORY.md"]


def test_decay_is_off_by_default_and_can_be_retuned(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({"memory/2026-01-01.md": BODY, "memory/2026-03-01.md": BODY})
    now = datetime(2026, 3, 31, tzinfo=UTC)
    with open_manager(ws, cfg()) as m:
        plain = _scores(m.search("zebra", now=now, min_score=0))
    assert len(set(plain.values())) == 1  # same text, same score: no decay
    with open_manager(ws, cfg(db="b.sqlite", query={"temporalDecay": {"enabled": True, "halfLifeDays": 30 * 4}})) as m:
        scores = _scores(m.search("zebra", now=now, min_score=0))
    assert scores["memory/2026-03-01.md"] == pytest.approx(plain["memory/2026-03-01.md"] * 2 ** (-30 / 120), abs=1e-4)
