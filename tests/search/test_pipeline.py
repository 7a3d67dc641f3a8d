"""Result limits: max results, minScore, the 4,000-character snippet budget, citations, score range."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mdrecall import open_manager
from mdrecall.types import format_citation as citation


def _file(i: int) -> str:
    lines = [f"# Glacier log {i}", ""]
    lines += [f"- Day {d}: glacier station {i} measured {d * 3 + i} cm of melt near the moraine." for d in range(1, 19)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def glaciers(make_ws: Callable[..., Path], cfg: Callable[..., dict]):  # type: ignore[no-untyped-def]
    ws = make_ws({f"memory/station-{i:02d}.md": _file(i) for i in range(14)})
    with open_manager(ws, cfg()) as m:
        m.sync()
        yield ws, m


def _check_citations(ws: Path, resp) -> None:  # type: ignore[no-untyped-def]
    for r in resp.results:
        lines = (ws / r.path).read_text(encoding="utf-8").split("\n")
        cited = "\n".join(lines[r.start_line - 1 : r.end_line])
        if r is resp.results[-1]:  # the last one may be cut inside its first line
            assert r.snippet and cited.startswith(r.snippet), r.citation
        else:
            assert r.snippet == cited, r.citation
        expected = f"{r.path}#L{r.start_line}" if r.start_line == r.end_line else f"{r.path}#L{r.start_line}-L{r.end_line}"
        assert r.citation == expected
        assert r.source == "memory"


def test_long_hits_are_narrowed_to_their_matching_lines(glaciers, cfg: Callable[..., dict]) -> None:  # type: ignore[no-untyped-def]
    ws, _ = glaciers
    narrow = {"snippet": {"narrowAboveChars": 300, "contextLines": 1}}
    with open_manager(ws, cfg(db="narrow.sqlite", query=narrow)) as m:
        resp = m.search("station 7 measured 31 cm", min_score=0)
    top = resp.results[0]
    assert top.path == "memory/station-07.md"
    assert top.end_line - top.start_line + 1 <= 3  # best line and one either side, not the whole chunk
    assert "31 cm" in top.snippet
    _check_citations(ws, resp)


@pytest.fixture
def wide(glaciers, cfg: Callable[..., dict]):  # type: ignore[no-untyped-def]
    ws, _ = glaciers
    with open_manager(ws, cfg(db="wide.sqlite", query={"snippet": {"narrowAboveChars": 100_000}})) as m:
        m.sync()
        yield ws, m


def test_budget_cuts_the_last_snippet(wide) -> None:  # type: ignore[no-untyped-def]
    ws, m = wide
    resp = m.search("glacier melt moraine", min_score=0)
    assert 1 < len(resp.results) <= 10
    total = sum(len(r.snippet) for r in resp.results)
    assert total <= 4000
    assert total > 4000 - 200  # the budget is used, not wasted
    _check_citations(ws, resp)


def test_leftover_budget_goes_to_a_cut_hit(wide, cfg: Callable[..., dict]) -> None:  # type: ignore[no-untyped-def]
    ws, _ = wide
    with open_manager(ws, cfg(db="wide.sqlite", query={"snippet": {"narrowAboveChars": 100_000}, "maxInjectedChars": 1400})) as m:
        resp = m.search("glacier melt moraine", min_score=0)
    assert sum(len(r.snippet) for r in resp.results) <= 1400
    last = resp.results[-1]
    others = [r.end_line - r.start_line + 1 for r in resp.results[:-1]]
    assert last.end_line - last.start_line + 1 < max(others)  # cut at a line boundary, range shrunk to match
    _check_citations(ws, resp)


def test_max_results_and_configured_budget(glaciers, cfg: Callable[..., dict]) -> None:  # type: ignore[no-untyped-def]
    ws, m = glaciers
    assert len(m.search("glacier", max_results=3).results) == 3
    with open_manager(ws, cfg(db="small.sqlite", query={"maxInjectedChars": 700, "maxResults": 2})) as small:
        resp = small.search("glacier melt")
        assert len(resp.results) <= 2 and sum(len(r.snippet) for r in resp.results) <= 700
        _check_citations(ws, resp)


def test_scores_are_in_unit_range_sorted_and_min_score_applies(glaciers) -> None:  # type: ignore[no-untyped-def]
    _, m = glaciers
    resp = m.search("station 7 moraine", min_score=0, max_results=50)
    scores = [r.score for r in resp.results]
    assert scores and all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    cutoff = scores[len(scores) // 2]
    high = m.search("station 7 moraine", min_score=cutoff, max_results=50)
    assert high.results and all(r.score >= cutoff for r in high.results)
    assert len(high.results) < len(resp.results)


def test_single_line_citation() -> None:
    assert citation("memory/a.md", 5, 5) == "memory/a.md#L5"
    assert citation("memory/a.md", 5, 9) == "memory/a.md#L5-L9"


def test_one_huge_line_is_cut_mid_line(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    ws = make_ws({"memory/wall.md": "avalanche " * 3000 + "\n"})
    with open_manager(ws, cfg(chunking={"tokens": 8000, "overlap": 0})) as m:
        resp = m.search("avalanche")
    assert sum(len(r.snippet) for r in resp.results) <= 4000
    assert all(r.start_line == r.end_line == 1 and r.citation == "memory/wall.md#L1" for r in resp.results)


def test_result_fields_and_json_shape(glaciers) -> None:  # type: ignore[no-untyped-def]
    _, m = glaciers
    hit = m.search("glacier")[0]
    plain = hit.to_dict()
    for key in ("path", "start_line", "end_line", "score", "snippet", "source", "citation"):
        assert plain[key] == getattr(hit, key)
    camel = hit.to_dict(camel=True)
    assert camel["startLine"] == hit.start_line and camel["endLine"] == hit.end_line
