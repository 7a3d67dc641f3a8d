"""One search, start to finish: retrieve, score, boost dates, diversify, filter, narrow, pack, cite.

Degrades step by step and says so in the response: hybrid → in-process vectors (no sqlite-vec) →
keyword-only (no provider, or the query embedding failed) → file scan (no FTS5).

Scores are absolute (search/relevance.py): a calibrated probability that the hit holds what was
asked, the same scale for keyword-only, vector-only and hybrid search. ``minScore`` therefore
filters, and a query about something the memory does not hold returns nothing, with a reason.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Sequence

import numpy as np

from mdrecall.config import MemoryConfig
from mdrecall.search import relevance as rel
from mdrecall.search.budget import Hit, LineLengths, pack
from mdrecall.search.dates import date_logit, query_dates
from mdrecall.search.decay import decay_multiplier
from mdrecall.search.fusion import Scored, rrf_fusion
from mdrecall.search.keyword import Candidate, keyword_search, scan_search
from mdrecall.search.mmr import mmr_rerank
from mdrecall.search.scope import ScopeLike
from mdrecall.search.supersede import supersede
from mdrecall.store.db import IndexDB
from mdrecall.text import cjk_share
from mdrecall.types import SearchMode, SearchResult

VectorSearch = Callable[[IndexDB, np.ndarray, int, ScopeLike], list[Candidate]]

#: Why a search returned nothing although the index has chunks: no hit reached ``minScore``.
NOTHING_RELEVANT = "nothing relevant"


@dataclass
class SearchPlan:
    query: str
    max_results: int
    min_score: float
    #: What the search may see (sources, whose transcripts); a plain list of sources also works.
    scope: ScopeLike
    now: datetime
    #: Line lengths of the indexed files (search/budget.py ``lengths_for``): the budget then counts
    #: exactly what each citation covers; without it, what the chunks hold is estimated.
    line_lengths: LineLengths | None = None


@dataclass
class SearchOutcome:
    results: list[SearchResult]
    mode: SearchMode
    warnings: list[str] = field(default_factory=list)
    degraded: bool = False
    #: Why ``results`` is empty (``"nothing relevant"``, ``"no candidates"``), else None.
    reason: str | None = None


_ANALYZERS: "weakref.WeakKeyDictionary[IndexDB, rel.Analyzer]" = weakref.WeakKeyDictionary()


def analyzer_for(db: IndexDB, tokenizer: str) -> rel.Analyzer:
    found = _ANALYZERS.get(db)
    if found is None or found.kind != tokenizer or found.db.conn is not db.conn:
        found = _ANALYZERS[db] = rel.Analyzer(db, tokenizer)
    return found


@dataclass
class Gathered:
    """Every candidate of one search with its evidence, before scores are turned into results."""

    hits: list[Hit]
    mode: SearchMode
    warnings: list[str]
    degraded: bool
    stats: rel.QueryStats | None
    #: The query's mean cosine to every stored vector (None without vectors).
    topical: float | None = None


_CENTROIDS: "weakref.WeakKeyDictionary[IndexDB, rel.Centroids]" = weakref.WeakKeyDictionary()


def _topical(db: IndexDB, query_vec: np.ndarray, vector_search: object) -> float | None:
    centroids = _CENTROIDS.get(db)
    if centroids is None:
        centroids = _CENTROIDS[db] = rel.Centroids()
    # The in-memory KNN already holds every vector as one matrix: its mean costs ~2 ms at 10k.
    owner = getattr(vector_search, "__self__", None)
    matrix = getattr(owner, "_matrix", None) if owner is not None else None
    return centroids.mean_cosine(db, query_vec, matrix if isinstance(matrix, np.ndarray) else None)


def gather(
    db: IndexDB,
    config: MemoryConfig,
    plan: SearchPlan,
    embed_query: Callable[[str], list[float]] | None,
    vector_search: VectorSearch | None,
    degraded_reasons: list[str],
    vector_languages: Sequence[str] | None = None,
    model: str | None = None,
) -> Gathered:
    """Retrieve candidates (keyword and vector) and score each with calibrated evidence."""
    q = config.query
    warnings = list(degraded_reasons)
    degraded = bool(degraded_reasons)
    limit = min(400, max(plan.max_results * q.hybrid.candidateMultiplier, 60))
    fts = db.caps.fts_available

    keyword: list[Candidate] = []
    if fts and (q.hybrid.enabled or embed_query is None or vector_search is None):
        keyword = keyword_search(db, plan.query, limit, plan.scope, q.fts.tokenizer)

    vector: list[Candidate] = []
    query_vec: np.ndarray | None = None
    use_vectors = embed_query is not None and vector_search is not None
    if (
        use_vectors
        and q.languageCheck
        and vector_languages is not None
        and not _reads_cjk(vector_languages)
        and cjk_share(plan.query) >= 0.5
    ):
        # An English-only model maps Chinese, Japanese or Korean text to noise that the fusion would
        # rank first (CMRC 2018: hybrid 0.47 recall@10 against keyword-only 0.99).
        warnings.append(
            "vector search skipped for this query: the embedding model reads only "
            f"{', '.join(vector_languages)}; answered by keyword search"
        )
        use_vectors = False
        if fts and not keyword:
            keyword = keyword_search(db, plan.query, limit, plan.scope, q.fts.tokenizer)
    if use_vectors:
        try:
            query_vec = np.asarray(embed_query(plan.query), dtype=np.float32)  # type: ignore[misc]
        except Exception as exc:  # any provider failure degrades this query to keywords
            warnings.append(f"query embedding failed, answered by keyword search only: {exc}")
            degraded = True
            use_vectors = False
            query_vec = None
            if fts and not keyword:
                keyword = keyword_search(db, plan.query, limit, plan.scope, q.fts.tokenizer)
        else:
            if np.any(query_vec):
                vector = vector_search(db, query_vec, limit, plan.scope)  # type: ignore[misc]
            else:
                query_vec = None

    if use_vectors and fts and q.hybrid.enabled:
        mode: SearchMode = "hybrid"
    elif use_vectors:
        mode = "vector-only"
    elif fts:
        mode = "keyword-only"
    else:
        mode = "file-scan"
        keyword = scan_search(db, plan.query, limit, plan.scope)

    # One entry per chunk, keyword candidates first (they carry the better-calibrated evidence).
    hits: dict[int, Hit] = {}
    for c in keyword + vector:
        if c.rowid not in hits:
            hits[c.rowid] = Hit(c.rowid, c.path, c.source, c.start_line, c.end_line, c.text)
    for c in vector:
        hits[c.rowid].cosine = c.score
    for rank, c in enumerate(keyword, 1):
        hits[c.rowid].keyword_rank = rank
        hits[c.rowid].text_score = c.score

    stats: rel.QueryStats | None = None
    use_keywords = mode != "vector-only"
    if mode == "vector-only" or hits:
        analyzer = analyzer_for(db, q.fts.tokenizer)
        stats = analyzer.query_stats(plan.query, db.chunk_count())
        texts = rel.fts_texts(db, hits) if fts else {}
        # BM25's length normalisation against the configured chunk size (in estimated tokens), a
        # constant: the corpus's own average would move every score whenever a note is added.
        ref_length = max(8, config.chunking.tokens)
        for hit in hits.values():
            indexed = texts.get(hit.rowid, hit.text)
            ev = analyzer.evidence(stats, indexed, ref_length)
            body_lines = hit.text.count("\n") + 1
            ev.line_terms = ev.line_terms[-body_lines:] if len(ev.line_terms) >= body_lines else [()] * body_lines
            hit.evidence = ev
            hit.line_weights = [sum(stats.idf[i] for i in terms) for terms in ev.line_terms]
    if query_vec is not None and hits:
        missing = [rowid for rowid, h in hits.items() if h.cosine is None]
        for rowid, cos in rel.cosines(db, query_vec, missing).items():
            hits[rowid].cosine = cos

    topical = _topical(db, query_vec, vector_search) if query_vec is not None else None
    vmodel = rel.vector_model(model)
    dates = query_dates(plan.query, plan.now) if q.dates.enabled else []
    for hit in hits.values():
        k_logit = rel.keyword_logit(hit.evidence) if use_keywords and hit.evidence is not None else None
        v_logit = rel.vector_logit(hit.cosine, vmodel, topical) if hit.cosine is not None and mode != "keyword-only" else None
        if mode == "hybrid":
            logit = rel.fused_logit(k_logit, v_logit)
        elif mode == "vector-only":
            logit = v_logit if v_logit is not None else -12.0
        else:
            logit = k_logit if k_logit is not None else -12.0
        if dates:
            logit += date_logit(hit.path, hit.source, dates, q.dates.boost, q.dates.nearbyDays)
        hit.logit = logit
        hit.score = rel.SCALE.score(logit)
    return Gathered(sorted(hits.values(), key=lambda h: h.score, reverse=True), mode, warnings, degraded, stats, topical)


def run_search(
    db: IndexDB,
    config: MemoryConfig,
    plan: SearchPlan,
    embed_query: Callable[[str], list[float]] | None,
    vector_search: VectorSearch | None,
    degraded_reasons: list[str],
    vector_languages: Sequence[str] | None = None,
    model: str | None = None,
) -> SearchOutcome:
    """``vector_languages``: what the embedding model reads (None: unknown or many); ``model``: the
    embedding model's name, which picks its cosine calibration (None: a conservative default)."""
    if model is None and embed_query is not None:
        model = getattr(getattr(embed_query, "__self__", None), "model", None)
    q = config.query
    found = gather(db, config, plan, embed_query, vector_search, degraded_reasons, vector_languages, model)
    hits = found.hits
    warnings = found.warnings

    if q.hybrid.fusion == "rrf" and found.mode == "hybrid":
        _rank_fuse(hits, q.hybrid.vectorWeight, q.hybrid.textWeight, q.hybrid.rrfK)

    if q.supersession.enabled:
        supersede(hits, q.supersession.margin)

    relevance = {h.rowid: h.score for h in hits}
    if q.temporalDecay.enabled:
        for h in hits:
            h.score *= decay_multiplier(h.path, h.source, plan.now, q.temporalDecay.halfLifeDays)
        hits.sort(key=lambda h: h.score, reverse=True)

    min_score = plan.min_score
    if found.mode in ("keyword-only", "file-scan") and min_score == q.minScore:
        min_score = q.keywordOnlyMinScore  # the configured cut-off, not one a caller asked for
    passing = [h for h in hits if h.score >= min_score]
    if not passing and q.temporalDecay.enabled:
        # Decay must not hide the only answer: fall back to hits relevant before decay.
        passing = [h for h in hits if relevance[h.rowid] >= min_score]

    if q.mmr.enabled and len(passing) > 1:
        head = passing[: max(q.mmr.candidates, plan.max_results)]
        passing = mmr_rerank(head, lambda h: h.score, lambda h: h.text, q.mmr.lambda_, key=lambda h: h.rowid,
                               normalise=False)

    reason = None
    if not passing:
        reason = NOTHING_RELEVANT if hits else "no candidates"
        if hits:
            warnings.append(
                f"nothing relevant: no memory scored at least minScore {min_score:g} "
                f"(best {hits[0].score:.3f})"
            )
    packed = pack(passing, plan.max_results, q.maxInjectedChars, q.snippet.contextLines, q.snippet.narrowAboveChars, db,
                  plan.line_lengths)
    results = [
        SearchResult(
            path=h.path,
            start_line=h.start_line,
            end_line=h.end_line,
            score=round(min(1.0, max(0.0, h.score)), 6),
            snippet=h.text,
            source=h.source,
            citation=citation(h.path, h.start_line, h.end_line),
            vector_score=h.cosine,
            text_score=h.text_score,
        )
        for h in packed
    ]
    return SearchOutcome(results, found.mode, warnings, found.degraded, reason)


def _rank_fuse(hits: list[Hit], vector_weight: float, text_weight: float, k: int) -> None:
    """``fusion: rrf``: order by reciprocal-rank fusion, keeping each hit's calibrated score."""
    keyword = [Candidate(h.rowid, h.path, h.source, h.start_line, h.end_line, h.text, h.text_score or 0.0)
               for h in sorted((h for h in hits if h.keyword_rank), key=lambda h: h.keyword_rank or 0)]
    vector = [Candidate(h.rowid, h.path, h.source, h.start_line, h.end_line, h.text, h.cosine or 0.0)
              for h in sorted((h for h in hits if h.cosine is not None), key=lambda h: -(h.cosine or 0.0))]
    order = {s.rowid: i for i, s in enumerate(rrf_fusion(keyword, vector, vector_weight, text_weight, k))}
    hits.sort(key=lambda h: order.get(h.rowid, len(order)))


def _reads_cjk(languages: Sequence[str]) -> bool:
    return any(lang in ("zh", "ja", "ko", "multilingual") for lang in languages)


def citation(path: str, start: int, end: int) -> str:
    return f"{path}#L{start}" if start == end else f"{path}#L{start}-L{end}"


__all__ = ["SearchPlan", "SearchOutcome", "run_search", "gather", "citation", "NOTHING_RELEVANT", "Scored"]
