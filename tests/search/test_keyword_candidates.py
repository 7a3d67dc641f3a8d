"""Keyword candidates: past the postings budget only chunks holding the query's rarest terms are
ranked, each with the full BM25 of every term; within it the ranking is FTS5's own."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mdrecall.search import keyword
from mdrecall.search.keyword import candidate_terms, keyword_search
from mdrecall.search.scope import Scope
from mdrecall.store.db import ChunkRow, FileRow, IndexDB, StoreOptions

COMMON = ["meeting", "project", "team", "review"]


@pytest.fixture()
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    """200 chunks of common words; a few also hold "zeppelin" or "pelicans"."""
    rng = random.Random(7)
    db = IndexDB(tmp_path / "i.sqlite", StoreOptions(vector_enabled=False))
    for i in range(200):
        words = rng.choices(COMMON, k=rng.randint(3, 9)) + rng.choices(["filler", "note", "plain"], k=5)
        if i % 40 == 3:
            words.append("zeppelin")
        if i % 25 == 4:
            words.append("pelicans")  # stemmed: the query word "pelican" counts these
        text = " ".join(words)
        source = "sessions" if i % 2 else "memory"
        path = f"memory/n{i:03d}.md" if source == "memory" else f".openclaw/sessions/s/transcripts/t{i:03d}.jsonl"
        db.replace_file(FileRow(path, source, f"h{i}", 1, 1), [ChunkRow(f"id{i}", path, source, 1, 1, f"h{i}", text, None, text)], "m")
    yield db
    db.close()


def _ranking(db: IndexDB, query: str, limit: int = 10, scope: Scope | None = None) -> list[tuple[int, float]]:
    return [(c.rowid, round(c.score, 9)) for c in keyword_search(db, query, limit, scope)]


def test_term_chunk_counts_use_the_index_tokenizer(db: IndexDB) -> None:
    counts = db.fts_term_chunks(["zeppelin", "pelican", "meetings", "absent", "e-mail"])
    assert counts["zeppelin"] == 5 and counts["pelican"] == 8  # Porter: "pelican" counts "pelicans"
    assert counts["meetings"] == sum(1 for (t,) in db.conn.execute("SELECT text FROM chunks") if "meeting" in t)
    assert counts["absent"] == 0
    assert "e-mail" not in counts  # two tokens: searched as a phrase, always a candidate term


def test_within_the_budget_the_ranking_is_the_full_one(db: IndexDB, monkeypatch: pytest.MonkeyPatch) -> None:
    query = "zeppelin meeting with the project team"
    assert candidate_terms(db, ["zeppelin", "meeting", "project", "team"]) is None  # 200 chunks < 8000
    full = _ranking(db, query)
    monkeypatch.setattr(keyword, "CANDIDATE_POSTINGS", 10**9)
    assert _ranking(db, query) == full


def test_past_the_budget_rare_terms_choose_and_every_term_scores(db: IndexDB, monkeypatch: pytest.MonkeyPatch) -> None:
    query = "zeppelin pelican meeting project"
    full = _ranking(db, query, limit=200)
    monkeypatch.setattr(keyword, "CANDIDATE_POSTINGS", 20)
    assert candidate_terms(db, ["zeppelin", "pelican", "meeting", "project"]) == ["zeppelin", "pelican"]
    pruned = _ranking(db, query, limit=10)
    rare_rows = {r for (r,) in db.conn.execute("SELECT rowid FROM chunks WHERE text LIKE '%zeppelin%' OR text LIKE '%pelican%'")}
    assert len(rare_rows) == 13 and {r for r, _ in pruned} <= rare_rows  # only chunks holding a rare term
    # ... ranked by the score the full ranking gives them (common terms included).
    assert pruned == [(r, s) for r, s in full if r in rare_rows][:10]
    assert pruned[:5] == full[:5]  # rare-term chunks lead the full ranking too

    monkeypatch.setattr(keyword, "CANDIDATE_POSTINGS", 6)  # room for "zeppelin" (5) only
    assert candidate_terms(db, ["zeppelin", "pelican", "meeting", "project"]) == ["zeppelin"]


def test_a_filter_applies_to_the_candidates(db: IndexDB, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyword, "CANDIDATE_POSTINGS", 20)
    query = "zeppelin pelican meeting project"
    memory_only = Scope(("memory",))
    full = {c.rowid: c.score for c in keyword_search(db, query, 200, memory_only)}
    got = keyword_search(db, query, 3, memory_only)
    assert [c.source for c in got] == ["memory"] * 3
    rare = {r for (r,) in db.conn.execute("SELECT rowid FROM chunks WHERE source = 'memory' AND text LIKE '%pelican%'")}
    assert {c.rowid for c in got} <= rare and all(abs(full[c.rowid] - c.score) < 1e-9 for c in got)


def test_too_few_rare_chunks_fall_back_to_every_match(db: IndexDB, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every zeppelin chunk is a transcript: a memory-only search must still answer, from the
    common terms, exactly as without the budget."""
    query = "zeppelin meeting project"
    expected = _ranking(db, query, limit=10, scope=Scope(("memory",)))
    monkeypatch.setattr(keyword, "CANDIDATE_POSTINGS", 6)
    assert candidate_terms(db, ["zeppelin", "meeting", "project"]) == ["zeppelin"]
    assert _ranking(db, query, limit=10, scope=Scope(("memory",))) == expected and expected
    assert len(_ranking(db, query, limit=50)) == 50  # unfiltered: 5 zeppelin chunks, then the rest
