"""Rank-based ways of merging keyword and vector candidates.

Search scores no longer come from here: they are calibrated per hit in ``search/relevance.py``
(dividing each list by its own best made the top hit score ~1 for any query). What remains:
reciprocal-rank fusion, which orders hits under ``query.hybrid.fusion: rrf`` (their scores stay the
calibrated ones), and the per-list normalised weighting that earlier rounds used, kept for
comparison in benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass

from mdrecall.search.keyword import Candidate


@dataclass(slots=True)
class Scored:
    rowid: int
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    score: float
    vector_score: float | None = None
    text_score: float | None = None


def normalise(candidates: list[Candidate]) -> dict[int, float]:
    if not candidates:
        return {}
    best = max(c.score for c in candidates)
    if best <= 0:
        return {c.rowid: 0.0 for c in candidates}
    return {c.rowid: max(0.0, c.score) / best for c in candidates}


def weighted_fusion(
    keyword: list[Candidate], vector: list[Candidate], vector_weight: float, text_weight: float
) -> list[Scored]:
    total = vector_weight + text_weight
    if total <= 0:
        vector_weight, text_weight, total = 0.7, 0.3, 1.0
    wv, wt = vector_weight / total, text_weight / total
    if not keyword:
        wv, wt = 1.0, 0.0
    if not vector:
        wv, wt = 0.0, 1.0
    t_norm = normalise(keyword)
    v_norm = normalise(vector)
    merged: dict[int, Scored] = {}
    for c in vector:
        merged[c.rowid] = Scored(c.rowid, c.path, c.source, c.start_line, c.end_line, c.text, 0.0, vector_score=c.score)
    for c in keyword:
        item = merged.get(c.rowid)
        if item is None:
            merged[c.rowid] = Scored(c.rowid, c.path, c.source, c.start_line, c.end_line, c.text, 0.0, text_score=c.score)
        else:
            item.text_score = c.score
    for item in merged.values():
        item.score = wv * v_norm.get(item.rowid, 0.0) + wt * t_norm.get(item.rowid, 0.0)
    return sorted(merged.values(), key=lambda s: s.score, reverse=True)


def rrf_fusion(keyword: list[Candidate], vector: list[Candidate], vector_weight: float, text_weight: float, k: int) -> list[Scored]:
    merged: dict[int, Scored] = {}
    raw: dict[int, float] = {}
    for weight, items, attr in ((vector_weight, vector, "vector_score"), (text_weight, keyword, "text_score")):
        for rank, c in enumerate(items, 1):
            item = merged.get(c.rowid)
            if item is None:
                item = merged[c.rowid] = Scored(c.rowid, c.path, c.source, c.start_line, c.end_line, c.text, 0.0)
            setattr(item, attr, c.score)
            raw[c.rowid] = raw.get(c.rowid, 0.0) + weight / (k + rank)
    best = max(raw.values(), default=0.0)
    for rowid, item in merged.items():
        item.score = raw[rowid] / best if best > 0 else 0.0
    return sorted(merged.values(), key=lambda s: s.score, reverse=True)
