"""The search request: one value every backend receives, built the same from keywords."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mdrecall import SearchRequest, open_manager
from mdrecall.contract import search_memory
from mdrecall.types import SearchOptions


def test_the_keyword_options_are_the_request_fields() -> None:
    # A new option is a new SearchRequest field; SearchOptions must name it too (typed keywords).
    assert set(SearchOptions.__annotations__) == {f.name for f in fields(SearchRequest)} - {"query"}


def test_a_request_from_keywords_or_a_request_is_the_same_value() -> None:
    when = datetime(2026, 3, 1, tzinfo=UTC)
    built = SearchRequest.of("q", max_results=3, sources=["memory"], as_of=when)
    assert built == SearchRequest("q", max_results=3, sources=("memory",), as_of=when)
    assert built.sources == ("memory",)  # a list is kept as a tuple: the request stays hashable
    assert hash(built) == hash(SearchRequest.of(built))
    assert SearchRequest.of(built, max_results=5).max_results == 5 and built.max_results == 3
    with pytest.raises(TypeError):
        SearchRequest.of("q", max_reslts=3)


def test_search_takes_a_request_or_keywords(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The invoices live in the bucket acme-invoices.\n")
    (ws / "memory" / "2026-01-02.md").write_text("# 2026-01-02\n\n- The invoices bucket moved to acme-billing.\n")
    config = {"provider": "none", "store": {"path": str(tmp_path / "i.sqlite")}, "sync": {"watch": False}}
    with open_manager(ws, config) as m:
        by_keywords = m.search("invoices bucket", max_results=1, min_score=0)
        by_request = m.search(SearchRequest("invoices bucket", max_results=1, min_score=0))
        through_helper = search_memory(m, SearchRequest("invoices bucket", max_results=1, min_score=0))
    assert len(by_keywords.results) == 1
    assert [h.citation for h in by_keywords] == [h.citation for h in by_request] == [h.citation for h in through_helper]
