"""One search, start to finish: retrieve, fuse, decay, diversify, truncate, cite.

Degrades step by step and says so in the response: hybrid → in-process vectors (no sqlite-vec) →
keyword-only (no provider, or the query embedding failed) → file scan (no FTS5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from mdrecall.config import MemoryConfig
from mdrecall.search.decay import decay_multiplier
from mdrecall.search.fusion import Scored, rrf_fusion, weighted_fusion
from mdrecall.search.keyword import Candidate, keyword_search, scan_search
from mdrecall.search.mmr import mmr_rerank
from mdrecall.search.scope import ScopeLike
from mdrecall.store.db import IndexDB
from mdrecall.text import cjk_share
from mdrecall.types import SearchHit, SearchMode, format_citation

VectorSearch = Callable[[IndexDB, "np.ndarray", int, ScopeLike], list[Candidate]]


@dataclass
class SearchPlan:
    query: str
    max_results: int
    min_score: float
    #: What the search may see (sources, whose transcripts); a plain list of sources also works.
    scope: ScopeLike
    now: datetime


@dataclass
class SearchOutcome:
    results: list[SearchHit]
    mode: SearchMode
    warnings: list[str] = field(default_factory=list)
    degraded: bool = False


def run_search(
    db: IndexDB,
    config: MemoryConfig,
    plan: SearchPlan,
    embed_query: Callable[[str], list[float]] | None,
    vector_search: VectorSearch | None,
    degraded_reasons: list[str],
    vector_languages: Sequence[str] | None = None,
) -> SearchOutcome:
    """``vector_languages``: what the embedding model reads (None: unknown or many)."""
    q = config.query
    warnings = list(degraded_reasons)
    degraded = bool(degraded_reasons)
    candidates = candidate_limit(config, plan.max_results)
    fts = db.caps.fts_available

    keyword: list[Candidate] = []
    if fts and (q.hybrid.enabled or embed_query is None or vector_search is None):
        keyword = keyword_search(db, plan.query, candidates, plan.scope, q.fts.tokenizer)

    vector: list[Candidate] = []
    use_vectors = embed_query is not None and vector_search is not None
    skip_reason = vector_skip_reason(config, plan.query, vector_languages) if use_vectors else None
    if skip_reason is not None:
        warnings.append(skip_reason)
        use_vectors = False
        if fts and not keyword:
            keyword = keyword_search(db, plan.query, candidates, plan.scope, q.fts.tokenizer)
    if use_vectors:
        import numpy as np  # the vector side only: keyword-only searches never load numpy

        try:
            query_vec = np.asarray(embed_query(plan.query), dtype=np.float32)  # type: ignore[misc]
        except Exception as exc:  # any provider failure degrades this query to keywords
            warnings.append(f"query embedding failed, answered by keyword search only: {exc}")
            degraded = True
            use_vectors = False
            if fts and not keyword:
                keyword = keyword_search(db, plan.query, candidates, plan.scope, q.fts.tokenizer)
        else:
            if np.any(query_vec):
                vector = vector_search(db, query_vec, candidates, plan.scope)  # type: ignore[misc]

    if use_vectors and fts and q.hybrid.enabled:
        mode: SearchMode = "hybrid"
    elif use_vectors:
        mode = "vector-only"
    elif fts:
        mode = "keyword-only"
    else:
        mode = "file-scan"
        keyword = scan_search(db, plan.query, candidates, plan.scope)

    return rank_candidates(config, plan, keyword, vector, mode, warnings, degraded)


def candidate_limit(config: MemoryConfig, max_results: int) -> int:
    """How many candidates each retriever (keywords, vectors) returns for one search."""
    return min(400, max(max_results * config.query.hybrid.candidateMultiplier, 60))


def vector_skip_reason(config: MemoryConfig, query: str, vector_languages: Sequence[str] | None) -> str | None:
    """Why this query's vector side is skipped (None: it is not), whatever engine retrieves it."""
    if not config.query.languageCheck or vector_languages is None or _reads_cjk(vector_languages):
        return None
    if cjk_share(query) < 0.5:
        return None
    # An English-only model maps Chinese, Japanese or Korean text to noise that the fusion would
    # rank first (CMRC 2018: hybrid 0.47 recall@10 against keyword-only 0.99).
    return (
        "vector search skipped for this query: the embedding model reads only "
        f"{', '.join(vector_languages)}; answered by keyword search"
    )


def rank_candidates(
    config: MemoryConfig,
    plan: SearchPlan,
    keyword: list[Candidate],
    vector: list[Candidate],
    mode: SearchMode,
    warnings: list[str],
    degraded: bool,
) -> SearchOutcome:
    """Everything after retrieval: fuse, decay, diversify, cut to the budget, cite. Shared by every
    engine that retrieves its own candidates (the Postgres backend does it in one SQL round trip)."""
    q = config.query
    if mode == "vector-only":
        merged = weighted_fusion([], vector, 1.0, 0.0)
    elif q.hybrid.fusion == "rrf" and mode == "hybrid":
        merged = rrf_fusion(keyword, vector, q.hybrid.vectorWeight, q.hybrid.textWeight, q.hybrid.rrfK)
    else:
        merged = weighted_fusion(keyword, vector, q.hybrid.vectorWeight, q.hybrid.textWeight)

    relevance = {m.rowid: m.score for m in merged}
    if q.temporalDecay.enabled:
        for m in merged:
            m.score *= decay_multiplier(m.path, m.source, plan.now, q.temporalDecay.halfLifeDays)
        merged.sort(key=lambda m: m.score, reverse=True)

    if q.mmr.enabled:
        merged = mmr_rerank(merged, lambda m: m.score, lambda m: m.text, q.mmr.lambda_)

    passing = [m for m in merged if m.score >= plan.min_score]
    if not passing:
        # Decay must not hide the only answer: fall back to hits relevant before decay.
        passing = [m for m in merged if relevance[m.rowid] >= plan.min_score]
    results = _truncate(_merge_overlaps(passing, plan.max_results), plan.max_results, q.maxInjectedChars)
    return SearchOutcome(results, mode, warnings, degraded)


def _reads_cjk(languages: Sequence[str]) -> bool:
    return any(lang in ("zh", "ja", "ko", "multilingual") for lang in languages)


def _merge_overlaps(items: list[Scored], limit: int) -> list[Scored]:
    """Fold a hit into a better-ranked hit from the same file whose lines it overlaps.

    Overlapping chunks would spend the character budget on the same lines twice; the merged hit
    keeps the better rank and covers the union of lines. Plain line-aligned Markdown chunks merge
    line by line; transcript chunks (whose rendered lines do not map 1:1 to JSONL lines) merge by
    their shared rendered lines.
    """
    out: list[Scored] = []
    for item in items:
        if len(out) >= limit:
            break  # hits below the cut must not widen the ones above it
        target = None
        if _contiguous(item) or item.source == "sessions":
            for kept in out:
                if kept.path == item.path and kept.source == item.source \
                        and (item.source == "sessions" or _contiguous(kept)) \
                        and item.start_line <= kept.end_line and item.end_line >= kept.start_line:
                    target = kept
                    break
        if target is None:
            out.append(item)
            continue
        if item.source == "sessions":
            _merge_rendered(target, item)
            continue
        lines = dict(zip(range(target.start_line, target.end_line + 1), target.text.split("\n")))
        for number, line in zip(range(item.start_line, item.end_line + 1), item.text.split("\n")):
            lines.setdefault(number, line)
        target.start_line, target.end_line = min(lines), max(lines)
        target.text = "\n".join(lines[n] for n in range(target.start_line, target.end_line + 1))
    return out


def _merge_rendered(target: Scored, item: Scored) -> None:
    """Union of two overlapping transcript chunks: overlapping chunks share whole rendered lines."""
    mine, theirs = target.text.split("\n"), item.text.split("\n")
    known = set(mine)
    extra = [line for line in theirs if line not in known]
    target.text = "\n".join(extra + mine if item.start_line < target.start_line else mine + extra)
    target.start_line = min(target.start_line, item.start_line)
    target.end_line = max(target.end_line, item.end_line)


def _contiguous(item: Scored) -> bool:
    return item.source == "memory" and item.text.count("\n") == item.end_line - item.start_line


def _truncate(items: list[Scored], max_results: int, budget: int) -> list[SearchHit]:
    out: list[SearchHit] = []
    used = 0
    for item in items[:max_results]:
        remaining = budget - used
        if remaining <= 0:
            break
        text, end_line = item.text, item.end_line
        if len(text) > remaining:
            text, end_line = _cut(item, remaining)
            if not text:
                break
        used += len(text)
        out.append(
            SearchHit(
                path=item.path,
                start_line=item.start_line,
                end_line=end_line,
                score=round(min(1.0, max(0.0, item.score)), 6),
                snippet=text,
                source=item.source,
                citation=format_citation(item.path, item.start_line, end_line),
                vector_score=item.vector_score,
                text_score=item.text_score,
            )
        )
    return out


def _cut(item: Scored, remaining: int) -> tuple[str, int]:
    """Keep the whole lines that fit; a first line longer than the budget is cut mid-line."""
    lines = item.text.split("\n")
    kept: list[str] = []
    size = 0
    for line in lines:
        extra = len(line) + (1 if kept else 0)
        if size + extra > remaining:
            break
        kept.append(line)
        size += extra
    if not kept:
        return item.text[:remaining], item.start_line
    if item.end_line - item.start_line + 1 == len(lines):
        return "\n".join(kept), item.start_line + len(kept) - 1
    return "\n".join(kept), item.end_line
