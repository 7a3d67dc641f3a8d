"""Which snippet lines hold the query's words (what ``mdrecall search`` marks)."""

from __future__ import annotations

from mdrecall.search.highlight import matched_terms, matching_lines

SNIPPET = "# Infra\n\n- Database: Postgres 17 on db-2.\n- Redis for sessions.\n- The databases are backed up nightly.\n- 王磊喜欢绿茶。"


def test_lines_with_the_query_words_by_stem() -> None:
    assert matching_lines("which database do we use?", SNIPPET) == [2, 4]  # "databases" counts, stop words do not
    assert matched_terms("which database do we use?", SNIPPET) == ["database"]
    assert matching_lines("redis session store", SNIPPET) == [3]


def test_cjk_and_no_match() -> None:
    assert matching_lines("谁喜欢绿茶", SNIPPET) == [5]
    assert matching_lines("kumquat", SNIPPET) == [] and matched_terms("", SNIPPET) == []
