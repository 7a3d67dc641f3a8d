"""Knowledge updates over real indexes: markup wins, confident detection marks ``supersededBy``,
an unsure one only says "possibly restated", and nothing is ever hidden (docs/facts.md).

The cases are our own small notes (never benchmark data); the LongMemEval figure is measured by
benchmarks/supersession.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.search.markup import collect, parse_marks
from mdrecall.types import SearchResponse

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _search(ws: Path, config: dict[str, Any], query: str, **kwargs: Any) -> SearchResponse:
    with open_manager(ws, config) as m:
        return m.search(query, min_score=kwargs.pop("min_score", 0), now=kwargs.pop("now", NOW), **kwargs)


def _paths(resp: SearchResponse) -> list[str]:
    return [r.path for r in resp.results]


def _by_path(resp: SearchResponse) -> dict[str, Any]:
    return {r.path: r for r in resp.results}


def _touch(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


# -- markup -----------------------------------------------------------------------------------------


def test_markup_parses_lines_ranges_files_and_where_it_belongs() -> None:
    text = "\n".join([
        "# 2026-05-01",
        "<!-- supersedes: memory/2026-03-02.md#L6, MEMORY.md#L3-L4 -->",
        "",
        "- We moved the database to Fly Postgres.",
        "- Alice now drinks tea. <!-- supersedes: ./memory/people.md -->",
        "<!-- supersedes: ../outside.md#L1, /etc/passwd, memory/x.md#L0 -->",
        "- Nothing valid above.",
    ])  # fmt: skip
    marks = parse_marks((7, "memory/2026-05-01.md", "memory", 1, 7, text))
    got = {(m.line, m.target, m.lines) for m in marks}
    assert got == {
        (4, "memory/2026-03-02.md", (6, 6)),  # the comment on its own line: the next statement's
        (4, "MEMORY.md", (3, 4)),
        (5, "memory/people.md", None),  # on the statement's line; a whole file; "./" dropped
    }
    assert all(m.rowid == 7 and m.citation == f"memory/2026-05-01.md#L{m.line}" for m in marks)
    # Overlapping chunks repeat lines: each mark once.
    assert len(collect([(7, "memory/2026-05-01.md", "memory", 1, 7, text)] * 2)) == 3
    # Transcripts are not Markdown: no markup there.
    assert parse_marks((8, "s.jsonl", "sessions", 1, 1, "User: <!-- supersedes: MEMORY.md -->")) == []


NOTES = {
    "memory/2026-03-02.md": "# 2026-03-02\n\n- Deploys go out on Tuesdays.\n- The production database runs on Postgres 15 on db-1.\n",
    "memory/2026-05-01.md": (
        "# 2026-05-01\n\n<!-- supersedes: memory/2026-03-02.md#L4 -->\n"
        "- We moved the production database to Fly Postgres.\n"
    ),
}


def test_markup_marks_the_older_statement_and_ranks_the_newer_first(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(NOTES)
    resp = _search(ws, cfg(), "production database Postgres db-1")
    by = _by_path(resp)
    old, new = by["memory/2026-03-02.md"], by["memory/2026-05-01.md"]
    # The older note matches the query better (db-1, 15): markup still puts the newer first.
    assert _paths(resp).index(new.path) < _paths(resp).index(old.path)
    assert old.superseded_by == "memory/2026-05-01.md#L4" and new.superseded_by is None
    assert old.explanation is not None and old.explanation["supersession"]["by"] == "markup"
    # Each side cites the other's statement line (the hits here are whole short notes).
    assert new.explanation is not None and new.explanation["supersession"]["supersedes"] == ["memory/2026-03-02.md#L4"]
    assert old.to_dict(camel=True)["supersededBy"] == "memory/2026-05-01.md#L4"
    assert "supersededBy" not in new.to_dict(camel=True)
    # Only line 4 was superseded: a search for the other fact of that note marks nothing.
    deploys = _search(ws, cfg(db="d.sqlite"), "when do deploys go out")
    assert deploys.results[0].path == "memory/2026-03-02.md" and deploys.results[0].superseded_by is None


def test_markup_brings_in_a_replacement_worded_differently(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({
        "MEMORY.md": "# Memory\n\n- Alice drinks two espressos every morning.\n- The office plant is a ficus.\n",
        "memory/2026-04-10.md": "# 2026-04-10\n\n- Alice quit caffeine entirely. <!-- supersedes: MEMORY.md#L3 -->\n",
    })  # fmt: skip
    resp = _search(ws, cfg(), "espressos morning")
    assert _paths(resp)[:2] == ["memory/2026-04-10.md", "MEMORY.md"]
    new, old = resp.results[0], resp.results[1]
    assert new.citation == "memory/2026-04-10.md#L3"  # the statement line only
    assert old.superseded_by == "memory/2026-04-10.md#L3"
    assert new.score == pytest.approx(old.score) and "quit caffeine" in new.snippet
    assert new.explanation is not None and "broughtIn" in new.explanation["supersession"]
    # The query matches neither word of the replacement: without markup it is not returned at all.
    plain = _search(ws, cfg(db="off.sqlite", query={"supersession": {"enabled": False}}), "espressos morning")
    assert "memory/2026-04-10.md" not in _paths(plain) and all(r.superseded_by is None for r in plain.results)


def test_markup_applies_beyond_the_head_of_the_ranking(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    # The replacement ranks far below the head (35 notes match better): detection would never
    # see the pair, markup still moves it above what it replaces.
    files = {f"memory/2026-02-{d:02d}.md": f"# n\n\n- Kiwi harvest crates kiwi crates report {d}.\n" for d in range(1, 29)}
    files.update({f"memory/2026-03-{d:02d}.md": f"# n\n\n- Kiwi harvest crates kiwi crates log {d}.\n" for d in range(1, 8)})
    files["memory/2026-01-05.md"] = "# n\n\n- Kiwi harvest crates kiwi crates kiwi crates: 40 per week.\n"
    files["memory/2026-05-20.md"] = "# n\n\n<!-- supersedes: memory/2026-01-05.md#L3 -->\n- Harvest now ships 55 per week.\n"
    ws = make_ws(files)
    plain = _search(ws, cfg(db="off.sqlite", query={"supersession": {"enabled": False}}), "kiwi harvest crates", max_results=50)
    assert _paths(plain).index("memory/2026-05-20.md") > 30 and _paths(plain)[0] == "memory/2026-01-05.md"
    resp = _search(ws, cfg(), "kiwi harvest crates", max_results=50)
    assert _paths(resp)[:2] == ["memory/2026-05-20.md", "memory/2026-01-05.md"]
    assert _by_path(resp)["memory/2026-01-05.md"].superseded_by == "memory/2026-05-20.md#L4"
    # The raised statement takes the score of the one it replaces, which keeps its own.
    assert resp.results[0].score == resp.results[1].score == plain.results[0].score
    # Thirty-five notes of one template ("report 3", "report 4", ...) are a series, not a fact
    # changing thirty-five times: detection marks none of them.
    assert sum(r.superseded_by is not None for r in resp.results) == 1


def test_markup_wins_over_detection(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({
        "memory/2026-01-10.md": "# n\n\n- The staging cluster has 3 nodes.\n",
        "memory/2026-02-10.md": "# n\n\n- The staging cluster has 5 nodes.\n",
        "memory/2026-01-20.md": "# n\n\n- Correction: the cluster got 4. <!-- supersedes: memory/2026-01-10.md#L3 -->\n",
    })  # fmt: skip
    resp = _search(ws, cfg(), "staging cluster nodes")
    assert _by_path(resp)["memory/2026-01-10.md"].superseded_by == "memory/2026-01-20.md#L3"
    # Without the markup, detection pairs the two dated statements.
    ws2 = make_ws({k: v for k, v in {
        "memory/2026-01-10.md": "# n\n\n- The staging cluster has 3 nodes.\n",
        "memory/2026-02-10.md": "# n\n\n- The staging cluster has 5 nodes.\n",
    }.items()})  # fmt: skip
    resp2 = _search(ws2, cfg(db="2.sqlite"), "staging cluster nodes")
    assert _by_path(resp2)["memory/2026-01-10.md"].superseded_by == "memory/2026-02-10.md#L3"


# -- detection ------------------------------------------------------------------------------------

CHANGED = {
    "memory/2026-02-03.md": (
        "# 2026-02-03\n\n- Backup job: the orders database backup job keeps 7 daily snapshots; daily snapshots "
        "of the orders database backup.\n"
    ),
    "memory/2026-04-11.md": (
        "# 2026-04-11\n\n- For the orders database, the backup job was reviewed by the platform team last week "
        "and it keeps 14 daily snapshots from here on, as agreed with everyone involved.\n"
    ),
    "memory/2026-03-01.md": "# 2026-03-01\n\n- Lunch with the design team.\n",
}
#: No margin (the default): an unsure pair never trades places, a confident one still does.
NO_MARGIN = {"supersession": {"margin": 0}}


def test_a_changed_value_is_marked_and_ranked_below_even_when_it_led_clearly(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws(CHANGED)
    off = _search(ws, cfg(db="off.sqlite", query={"supersession": {"enabled": False}}), "backup job daily snapshots orders database")
    on = _search(ws, cfg(query=NO_MARGIN), "backup job daily snapshots orders database")
    assert _paths(off)[:2] == ["memory/2026-02-03.md", "memory/2026-04-11.md"]
    assert _paths(on)[:2] == ["memory/2026-04-11.md", "memory/2026-02-03.md"]
    older = _by_path(on)["memory/2026-02-03.md"]
    assert older.superseded_by == "memory/2026-04-11.md#L3"
    assert older.explanation is not None
    details = older.explanation["supersession"]
    assert details["by"] == "detected" and "7 → 14" in details["why"]
    # The newer takes the older's score; the older keeps its own.
    assert on.results[0].score == on.results[1].score == off.results[0].score
    # Nothing hidden: the same hits come back.
    assert sorted(_paths(on)) == sorted(_paths(off))


def test_a_change_word_counts_as_a_changed_value(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({
        "memory/2026-01-15.md": "# n\n\n- Bob commutes to the office by train.\n",
        "memory/2026-03-15.md": "# n\n\n- Bob no longer commutes to the office by train; he cycles.\n",
    })  # fmt: skip
    resp = _search(ws, cfg(), "how does Bob commute to the office")
    older = _by_path(resp)["memory/2026-01-15.md"]
    assert resp.results[0].path == "memory/2026-03-15.md" and older.superseded_by == "memory/2026-03-15.md#L3"
    assert older.explanation is not None and "no longer" in older.explanation["supersession"]["why"]


def test_an_unsure_restatement_is_only_explained(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    # Same words, no number and no change word between them: maybe a change, maybe two facts.
    ws = make_ws({
        "memory/2026-01-12.md": "# n\n\n- The quarterly offsite venue shortlist includes the lakeside lodge.\n",
        "memory/2026-02-20.md": "# n\n\n- The quarterly offsite venue shortlist includes the mountain cabin, with a sauna and a view of the valley.\n",
    })  # fmt: skip
    resp = _search(ws, cfg(), "quarterly offsite venue shortlist")
    older, newer = _by_path(resp)["memory/2026-01-12.md"], _by_path(resp)["memory/2026-02-20.md"]
    assert older.superseded_by is None and newer.superseded_by is None
    assert older.explanation is not None and older.explanation["supersession"]["possiblyRestatedBy"] == "memory/2026-02-20.md#L3"
    # Unsure: the order the evidence gives is kept.
    assert _paths(resp)[0] == "memory/2026-01-12.md"
    # With a margin, a near-tie is moved newest first (the older led by less than it), still unmarked.
    lenient = _search(ws, cfg(db="lenient.sqlite", query={"supersession": {"margin": 1.5}}), "quarterly offsite venue shortlist")
    assert _paths(lenient)[0] == "memory/2026-02-20.md"
    assert _by_path(lenient)["memory/2026-01-12.md"].superseded_by is None


def test_the_same_file_and_the_same_day_are_never_ordered(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({
        "memory/2026-02-01.md": "# n\n\n- The release train ships 2 builds a week.\n\n- The release train ships 3 builds a week.\n",
        "memory/2026-02-01-standup.md": "# n\n\n- The release train ships 4 builds a week.\n",
    })  # fmt: skip
    resp = _search(ws, cfg(), "release train builds a week")
    assert resp.results and all(r.superseded_by is None for r in resp.results)


def test_evergreen_entries_are_superseded_only_by_notes_dated_after_the_file_changed(
    make_ws: Callable[..., Path], cfg: Callable[..., dict]
) -> None:
    files = {
        "MEMORY.md": "# Memory\n\n- The support rotation has 6 engineers.\n",
        "memory/2026-05-04.md": "# 2026-05-04\n\n- The support rotation has 8 engineers.\n",
    }
    ws = make_ws(files)
    _touch(ws / "MEMORY.md", datetime(2026, 4, 1, tzinfo=UTC))
    resp = _search(ws, cfg(), "support rotation engineers")
    assert _by_path(resp)["MEMORY.md"].superseded_by == "memory/2026-05-04.md#L3"
    assert _paths(resp)[0] == "memory/2026-05-04.md"
    # MEMORY.md changed after the note: it may already hold the newer fact, so nothing is marked.
    _touch(ws / "MEMORY.md", datetime(2026, 5, 20, tzinfo=UTC))
    later = _search(ws, cfg(db="later.sqlite"), "support rotation engineers")
    assert all(r.superseded_by is None for r in later.results)


def test_a_promoted_entry_is_dated_by_the_note_it_came_from(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    marker = "<!-- mdrecall:promoted id=3f2a9c01b7de source=memory/2026-01-02.md:3-3 score=0.61 recalls=4 -->"
    ws = make_ws({
        "MEMORY.md": f"# Memory\n\n- The on-call pager budget is 20 pages a month. {marker}\n",
        "memory/2026-03-09.md": "# 2026-03-09\n\n- The on-call pager budget is 12 pages a month.\n",
        "memory/2026-01-02.md": "# 2026-01-02\n\n- Something else entirely.\n",
    })  # fmt: skip
    _touch(ws / "MEMORY.md", datetime(2026, 5, 30, tzinfo=UTC))  # promoted after the newer note
    resp = _search(ws, cfg(), "on-call pager budget pages a month")
    assert _by_path(resp)["MEMORY.md"].superseded_by == "memory/2026-03-09.md#L3"


def test_transcript_messages_supersede_across_sessions_not_within_one(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    def transcript(*messages: tuple[str, str, str]) -> str:
        return "".join(json.dumps({"role": r, "content": c, "timestamp": t}) + "\n" for r, c, t in messages)

    root = ".openclaw/sessions/main/transcripts"
    ws = make_ws({
        f"{root}/a.jsonl": transcript(
            ("user", "My reading goal is 12 books this year.", "2026-01-04T10:00:00Z"),
            ("assistant", "A reading goal of 12 books this year is a fine target.", "2026-01-04T10:00:30Z"),
        ),
        f"{root}/b.jsonl": transcript(
            ("user", "Update: my reading goal is 20 books this year.", "2026-03-08T09:00:00Z"),
        ),
    })  # fmt: skip
    config = cfg(sources=["memory", "sessions"])
    resp = _search(ws, config, "reading goal books this year", session_key="main")
    assert _paths(resp) == [f"{root}/b.jsonl", f"{root}/a.jsonl"]
    older = resp.results[1]
    assert older.superseded_by == f"{root}/b.jsonl#L1"
    assert older.explanation is not None and "12 → 20" in older.explanation["supersession"]["why"]
    # Within one conversation a later message (here the assistant's reply, in a chunk of its own)
    # restating the value differently is not a change of mind.
    filler = " ".join(f"word{i}" for i in range(160))
    ws2 = make_ws({
        f"{root}/c.jsonl": transcript(
            ("user", f"My reading goal is 12 books this year. {filler}", "2026-01-04T10:00:00Z"),
            ("assistant", f"{filler} So your reading goal is now 15 books this year?", "2026-01-04T10:00:30Z"),
        ),
    })  # fmt: skip
    echo = _search(ws2, cfg(db="echo.sqlite", sources=["memory", "sessions"]), "reading goal books this year", session_key="main")
    covered = {n for r in echo.results for n in range(r.start_line, r.end_line + 1)}
    assert covered == {1, 2} and all(r.superseded_by is None for r in echo.results)


def test_supersession_and_detection_can_be_turned_off(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({**CHANGED, **NOTES})
    off = _search(ws, cfg(db="off.sqlite", query={"supersession": {"enabled": False}}), "backup job daily snapshots orders database")
    assert all(r.superseded_by is None and "supersession" not in (r.explanation or {}) for r in off.results)
    markup_only = {"supersession": {"detect": False}}
    detected = _search(ws, cfg(db="nodetect.sqlite", query=markup_only), "backup job daily snapshots orders database")
    assert _by_path(detected)["memory/2026-02-03.md"].superseded_by is None  # detection is off
    marked = _search(ws, cfg(db="nodetect2.sqlite", query=markup_only), "production database Postgres db-1")
    assert _by_path(marked)["memory/2026-03-02.md"].superseded_by == "memory/2026-05-01.md#L4"


def test_decay_does_not_put_a_superseded_evergreen_line_back_on_top(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({
        "MEMORY.md": "# Memory\n\n- The VPN gateway is vpn-old.example.com.\n",
        "memory/2026-01-20.md": "# n\n\n- VPN gateway: vpn-new.example.com. <!-- supersedes: MEMORY.md#L3 -->\n",
    })  # fmt: skip
    decay = {"temporalDecay": {"enabled": True, "halfLifeDays": 10}}  # the note is months old: decay ≈ 0.0001
    resp = _search(ws, cfg(query=decay), "VPN gateway")
    assert _paths(resp) == ["memory/2026-01-20.md", "MEMORY.md"]
    assert resp.results[1].superseded_by == "memory/2026-01-20.md#L3"


def test_hybrid_search_with_the_real_model_keeps_the_rules(make_ws: Callable[..., Path], cfg: Callable[..., dict], local_provider) -> None:  # type: ignore[no-untyped-def]
    from mdrecall.testing import plugin, registered

    ws = make_ws({**CHANGED, **NOTES})
    with registered(plugin(providers={"minilm": lambda config: local_provider})):
        with open_manager(ws, cfg(provider="minilm")) as m:
            resp = m.search("backup job daily snapshots orders database", min_score=0, now=NOW)
            assert resp.mode == "hybrid"
            assert _paths(resp)[:2] == ["memory/2026-04-11.md", "memory/2026-02-03.md"]
            assert _by_path(resp)["memory/2026-02-03.md"].superseded_by == "memory/2026-04-11.md#L3"
            marked = m.search("where does the production database run", min_score=0, now=NOW)
            assert _by_path(marked)["memory/2026-03-02.md"].superseded_by == "memory/2026-05-01.md#L4"
            assert _paths(marked).index("memory/2026-05-01.md") < _paths(marked).index("memory/2026-03-02.md")


# -- statements, not query words ------------------------------------------------------------------


@pytest.mark.parametrize("query", ["database", "where is the database hosted?"])
def test_one_and_two_word_questions_catch_a_named_replacement(make_ws: Callable[..., Path], cfg: Callable[..., dict], query: str) -> None:
    ws = make_ws({
        "memory/2026-01-10.md": "# 2026-01-10\n\n- Database is hosted on Heroku Postgres.\n",
        "memory/2026-05-02.md": "# 2026-05-02\n\n- We moved the database from Heroku to Fly Postgres.\n",
    })  # fmt: skip
    resp = _search(ws, cfg(), query)
    assert _paths(resp)[0] == "memory/2026-05-02.md"
    older = _by_path(resp)["memory/2026-01-10.md"]
    assert older.superseded_by == "memory/2026-05-02.md#L3"
    assert older.explanation is not None and "Heroku" in older.explanation["supersession"]["why"]


@pytest.mark.parametrize(
    ("query", "older", "newer"),
    [
        # a checklist beside a date: both say "v0.4 release"
        ("when is the v0.4 release?", "- v0.4 release date stays Thursday 2026-11-12.",
         "- Release checklist for v0.4 drafted: migrations, feature flags off by default, changelog."),
        # another fix that says "database"
        ("database", "- Fix: per-test Redis database index in the login tests.",
         "- Mira wants a short runbook for restoring the database from a snapshot."),
        ("how many dogs", "- Caroline has 2 dogs.", "- Melanie has 3 dogs."),  # another person
        ("sprint velocity", "- Sprint 12 velocity was 30 points.", "- Sprint 13 velocity was 25 points."),  # another sprint
        ("bass caught with Alex", "- Caught 7 bass with Alex on 7/10.", "- Caught 9 bass with Alex on 7/22."),  # another trip
        ("plans for the weekend", "- Hiking with friends this weekend.", "- Are you planning anything else anymore this weekend?"),  # a question
    ],
)
def test_a_statement_about_another_subject_is_never_marked(
    make_ws: Callable[..., Path], cfg: Callable[..., dict], query: str, older: str, newer: str
) -> None:
    ws = make_ws({"memory/2026-01-10.md": f"# 2026-01-10\n\n{older}\n", "memory/2026-05-02.md": f"# 2026-05-02\n\n{newer}\n"})
    resp = _search(ws, cfg(), query)
    assert resp.results and all(r.superseded_by is None for r in resp.results)


def test_a_dated_memory_line_is_superseded_by_a_later_note(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """MEMORY.md changes often (its file time says little); a line that carries its own date is
    dated by it."""
    ws = make_ws({
        "MEMORY.md": "# Memory\n\n- 2026-02-01: The support rotation has 6 engineers.\n",
        "memory/2026-05-04.md": "# 2026-05-04\n\n- The support rotation has 8 engineers.\n",
    })
    _touch(ws / "MEMORY.md", datetime(2026, 5, 20, tzinfo=UTC))  # edited after the note, elsewhere
    resp = _search(ws, cfg(), "support rotation")
    assert _by_path(resp)["MEMORY.md"].superseded_by == "memory/2026-05-04.md#L3"
    assert _paths(resp)[0] == "memory/2026-05-04.md"


# -- reading ahead ----------------------------------------------------------------------------------


class _FlatCorpus:
    """Every term equally rare (what the statements say decides), with the index's own stems."""

    def __init__(self) -> None:
        from mdrecall.search.corpus import PorterTokens

        self._tokens = PorterTokens()

    def tokens(self, text: str) -> list[str]:
        return self._tokens.tokens(text)

    def chunk_count(self) -> int:
        return 100

    def doc_freqs(self, terms: object, forms: object, cjk: list[bool]) -> list[int]:
        return [5] * len(cjk)


def _scored_hits(query: str, notes: dict[str, str], corpus: _FlatCorpus) -> tuple[Any, list[Any]]:
    from mdrecall.search.budget import Hit
    from mdrecall.search.relevance import evidence, query_stats

    stats = query_stats(query, corpus)
    hits = []
    for rowid, (path, text) in enumerate(notes.items(), 1):
        ev = evidence(stats, text, 200, corpus)
        weights = [float(sum(stats.idf[i] for i in terms)) for terms in ev.line_terms[-len(text.split("\n")):]]
        hits.append(Hit(rowid, path, "memory", 3, 2 + text.count("\n") + 1, text, score=1 - rowid / 10,
                        logit=2 - rowid / 10, evidence=ev, line_weights=weights))  # fmt: skip
    return stats, hits


def _outcome(hits: list[Any]) -> list[tuple[Any, ...]]:
    return [(h.path, h.score, h.superseded_by, json.dumps(h.supersession, sort_keys=True)) for h in hits]


UPDATES = {
    "memory/2026-02-03.md": "- The backup job keeps 7 daily snapshots of the orders database.",
    "memory/2026-04-11.md": "- The backup job keeps 14 daily snapshots of the orders database now.",
    "memory/2026-03-01.md": "- The orders database backup job was reviewed with the team.",
    "memory/2026-05-02.md": "- Staging gets daily snapshots too.",
}


def test_what_is_read_ahead_is_what_detection_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Statements, their times and the verdicts of pairs read while the query is embedded
    (``Reading.ahead``) are what detection uses after: the same marks, none of it read twice."""
    import mdrecall.search.supersede as sup

    query = "how many daily snapshots does the orders database backup job keep"
    corpus = _FlatCorpus()
    stats, fresh = _scored_hits(query, UPDATES, corpus)
    sup.supersede(fresh, sup.Context(stats, corpus.tokens, None, 0.0))
    assert fresh[1].superseded_by == "memory/2026-04-11.md#L3"  # a real change, detected

    _, ahead_hits = _scored_hits(query, UPDATES, corpus)
    reading = sup.Reading(stats, corpus.tokens, None)
    reading.ahead(ahead_hits, lambda: False)
    calls = {"statement": 0, "compare": 0, "stated": 0}
    for name in calls:
        real = getattr(sup, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(sup, name, counted)
    _, hits = _scored_hits(query, UPDATES, corpus)  # new Hit objects, as scoring makes them
    ctx = sup.Context(stats, corpus.tokens, None, 0.0, reading=reading)
    assert ctx.reading is reading
    sup.supersede(hits, ctx)
    assert _outcome(hits) == _outcome(fresh)
    assert calls == {"statement": 0, "compare": 0, "stated": 0}, "read ahead, so not read again"


def test_reading_ahead_stops_when_told_and_is_not_used_for_other_statistics() -> None:
    import mdrecall.search.supersede as sup
    from mdrecall.search.relevance import query_stats

    query = "how many daily snapshots does the orders database backup job keep"
    corpus = _FlatCorpus()
    stats, hits = _scored_hits(query, UPDATES, corpus)
    reading = sup.Reading(stats, corpus.tokens, None)
    reading.ahead(hits, lambda: True)  # the embedding is due: nothing more is read
    assert not reading._statements and not reading._verdicts
    asked = iter([False, False, True])  # two statements read, then due
    reading.ahead(hits, lambda: next(asked, True))
    assert len(reading._statements) == 2 and not reading._verdicts
    # Another query's statistics (or another tokenizer) make their own reading: nothing carried over.
    other = sup.Context(query_stats("snapshots", corpus), corpus.tokens, None, 0.0, reading=reading)
    assert other.reading is not reading
    assert sup.Context(stats, _FlatCorpus().tokens, None, 0.0, reading=reading).reading is not reading
    assert sup.Context(stats, corpus.tokens, None, 0.0, reading=reading).reading is reading
