"""Hybrid merging: weighted fusion on normalised scores, reciprocal-rank fusion."""

from __future__ import annotations

import pytest

from mdrecall.search.fusion import rrf_fusion, weighted_fusion
from mdrecall.search.keyword import Candidate


def _c(rowid: int, score: float) -> Candidate:
    return Candidate(rowid, f"memory/{rowid}.md", "memory", 1, 1, f"text {rowid}", score)


def test_weighted_fusion_normalises_each_list() -> None:
    keyword = [_c(1, 12.0), _c(2, 6.0)]  # raw BM25: any scale
    vector = [_c(2, 0.8), _c(3, 0.4)]  # cosine
    merged = {s.rowid: s for s in weighted_fusion(keyword, vector, 0.7, 0.3)}
    assert merged[1].score == pytest.approx(0.3 * 1.0)
    assert merged[2].score == pytest.approx(0.7 * 1.0 + 0.3 * 0.5)
    assert merged[3].score == pytest.approx(0.7 * 0.5)
    assert merged[2].text_score == 6.0 and merged[2].vector_score == 0.8
    assert [s.rowid for s in weighted_fusion(keyword, vector, 0.7, 0.3)] == [2, 3, 1]


def test_weighted_fusion_single_list_uses_full_scale() -> None:
    only_kw = weighted_fusion([_c(1, 3.0), _c(2, 1.5)], [], 0.7, 0.3)
    assert [s.score for s in only_kw] == pytest.approx([1.0, 0.5])
    only_vec = weighted_fusion([], [_c(1, 0.9), _c(2, 0.45)], 0.7, 0.3)
    assert [s.score for s in only_vec] == pytest.approx([1.0, 0.5])
    assert weighted_fusion([], [], 0.7, 0.3) == []


def test_weights_are_normalised_to_sum_one() -> None:
    merged = weighted_fusion([_c(1, 1.0)], [_c(1, 1.0)], 2.0, 2.0)
    assert merged[0].score == pytest.approx(1.0)


def test_rrf_orders_by_weighted_reciprocal_rank() -> None:
    keyword = [_c(1, 9.0), _c(2, 8.0)]
    vector = [_c(2, 0.9), _c(3, 0.8)]
    merged = rrf_fusion(keyword, vector, 0.7, 0.3, 60)
    assert [s.rowid for s in merged] == [2, 3, 1]
    best = 0.7 / 61 + 0.3 / 62
    assert [s.score for s in merged] == pytest.approx([1.0, (0.7 / 62) / best, (0.3 / 61) / best])
    assert all(0 <= s.score <= 1 for s in merged)
