"""Dates named in a query, and the daily notes they favour."""

from __future__ import annotations

from datetime import UTC, date, datetime

from mdrecall.search.dates import date_logit, query_dates

NOW = datetime(2022, 3, 24, 15, 0, tzinfo=UTC)  # a Thursday


def test_explicit_dates_in_several_spellings() -> None:
    for query in ("what did we decide on March 16, 2022?", "notes from 16 March 2022", "2022-03-16 standup",
                  "what happened on 3/16/2022", "the meeting on Mar 16th"):
        assert (date(2022, 3, 16), date(2022, 3, 16)) in query_dates(query, NOW), query


def test_relative_dates_count_from_now() -> None:
    assert query_dates("what did I eat yesterday", NOW) == [(date(2022, 3, 23),) * 2]
    assert (date(2022, 3, 22),) * 2 in query_dates("what did we decide last Tuesday?", NOW)
    assert (date(2022, 3, 17),) * 2 in query_dates("what happened last Thursday", NOW)  # not today
    week = query_dates("what did we ship last week", NOW)
    assert week == [(date(2022, 3, 14), date(2022, 3, 20))]
    ago = query_dates("the bug from two weeks ago", NOW)
    assert ago and ago[0][0] <= date(2022, 3, 10) <= ago[0][1]


def test_a_month_without_a_year_is_the_latest_one() -> None:
    assert query_dates("how many appointments did I have in March?", NOW) == [(date(2022, 3, 1), date(2022, 3, 31))]
    assert query_dates("trips in May", NOW) == [(date(2021, 5, 1), date(2021, 5, 31))]
    assert query_dates("in May 2020 we moved", NOW) == [(date(2020, 5, 1), date(2020, 5, 31))]


def test_may_the_verb_is_not_a_month() -> None:
    assert query_dates("I may want to revisit the budget", NOW) == []
    assert query_dates("no date here at all", NOW) == []


def test_boost_for_the_day_and_less_for_nearby_days() -> None:
    ranges = [(date(2022, 3, 16), date(2022, 3, 16))]
    assert date_logit("memory/2022-03-16.md", "memory", ranges, 1.5, 2) == 1.5
    near = date_logit("memory/2022-03-17.md", "memory", ranges, 1.5, 2)
    far = date_logit("memory/2022-03-18.md", "memory", ranges, 1.5, 2)
    assert 1.5 > near > far > 0
    assert date_logit("memory/2022-03-20.md", "memory", ranges, 1.5, 2) == 0
    assert date_logit("MEMORY.md", "memory", ranges, 1.5, 2) == 0
    assert date_logit("memory/2022-03-16.md", "memory", [], 1.5, 2) == 0


def test_the_named_days_note_wins(make_ws, cfg) -> None:  # type: ignore[no-untyped-def]
    from mdrecall import open_manager

    body = "- We decided on the vendor for the office chairs and the budget for them.\n"
    ws = make_ws({f"memory/2022-03-{d:02d}.md": f"# 2022-03-{d:02d}\n\n{body}" for d in (9, 16, 23)})
    with open_manager(ws, cfg()) as m:
        plain = m.search("what did we decide about the office chairs budget", now=NOW, min_score=0)
        dated = m.search("what did we decide about the office chairs budget on March 16, 2022?", now=NOW, min_score=0)
        relative = m.search("what did we decide about the office chairs budget last Wednesday?", now=NOW, min_score=0)
    assert len({r.score for r in plain.results}) == 1  # the same text: no date, no preference
    assert dated.results[0].path == "memory/2022-03-16.md"
    assert dated.results[0].score > dated.results[1].score
    assert relative.results[0].path == "memory/2022-03-23.md"  # NOW is Thursday 2022-03-24
