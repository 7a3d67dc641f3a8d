"""One search, start to finish: retrieve, score, boost dates, order restatements, decay, filter,
diversify, narrow, pack, cite.

Degrades step by step and says so in the response: hybrid → in-process vectors (no sqlite-vec) →
keyword-only (no provider, or the query embedding failed) → file scan (no FTS5).

Scores are absolute (search/relevance.py): a calibrated probability that the hit holds what was
asked, the same scale for keyword-only, vector-only and hybrid search. ``minScore`` therefore
filters, and a query about something the memory does not hold returns nothing, with a reason.
Everything after retrieval (:func:`rank_candidates`) is shared by every engine that retrieves its
own candidates (the Postgres backend); the corpus statistics it needs come from a
:class:`~mdrecall.search.corpus.Corpus` of that engine's store. Each hit carries an
``explanation``: the signals behind its score (docs/retrieval.md).

Work per candidate is bounded by what can still be read: the named-speaker step (which can only
lower a score) runs only on hits that can reach ``minScore`` or supersession's head, and where it
cannot change a score at all, only on the hits supersession and packing read (``_speak``,
``_Deferred``); results are identical to running it on every candidate (tests/search/test_pruned_steps.py).

Why this module is long: every stage after retrieval reads the same candidate list and the same
query analysis (named speakers, general questions, restatements), and splitting the stages apart
would pass that state through a dozen signatures; the named-speaker step stays here because it is
interleaved with scoring (after the logits, before the order) and deferred into packing. Each
stage's own arithmetic lives in its module (relevance, narrowing, packing, supersession, speaker).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from mdrecall.search.corpus import Vector

from mdrecall.config import MemoryConfig
from mdrecall.search import relevance as rel
from mdrecall.search.ahead import QueryEmbedding
from mdrecall.search.asof import known_then
from mdrecall.search.budget import Hit, message_map, pack
from mdrecall.search.corpus import CandidateCorpus, Corpus, index_corpus, indexed_chunks
from mdrecall.search.dates import date_logit, query_dates
from mdrecall.search.dating import FileTimes
from mdrecall.search.decay import decay_multiplier
from mdrecall.search.explain import explain
from mdrecall.search.filelines import FileLineLengths, FileLines, LineLengths
from mdrecall.search.fusion import rrf_fusion
from mdrecall.search.keyword import Candidate, keyword_search, scan_search
from mdrecall.search.markup import ChunkRow, Mark, MarkupSource, collect
from mdrecall.search.mmr import mmr_rerank
from mdrecall.search.scope import ScopeLike
from mdrecall.search.speaker import (
    asked_names,
    asked_speaker,
    general_question,
    is_question,
    line_speakers,
    other_speaker,
    prefer,
    speaker_names,
)
from mdrecall.search.supersede import HEAD, Context, Link, Reading, enforce, supersede
from mdrecall.store.db import IndexDB
from mdrecall.text import cjk_share
from mdrecall.types import SearchHit, SearchMode, format_citation

VectorSearch = Callable[[IndexDB, "np.ndarray", int, ScopeLike], list[Candidate]]

#: Why a search returned nothing although the index had candidates: no hit reached ``minScore``.
NOTHING_RELEVANT = "nothing relevant"
#: Why a search returned nothing: no chunk matched at all.
NO_CANDIDATES = "no candidates"
#: A hit whose matched query words weigh this much, in units of the rarest word possible (a word
#: only it holds weighs ~0.8-0.9), matches what is specific to this memory: a general question it
#: answers is not gated (``general_gate``).
SPECIFIC_MASS = 0.9
#: The logit of a side that found nothing (far below any cut-off).
_NO_EVIDENCE = -12.0
#: How far below a bound a score must be to be left out: rounding never moves a score this much.
_SCORE_SLACK = 1e-9


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
    #: "As known then": only what was written by this time (search/asof.py); None: everything.
    as_of: datetime | None = None
    #: File and message times of the workspace (search/dating.py ``times_for``), for as-of search
    #: and knowledge updates; without them only dated notes' paths date anything.
    times: FileTimes | None = None


@dataclass
class SearchOutcome:
    results: list[SearchHit]
    mode: SearchMode
    warnings: list[str] = field(default_factory=list)
    degraded: bool = False
    #: Why ``results`` is empty (``"nothing relevant"``, ``"no candidates"``), else None.
    reason: str | None = None


@dataclass
class Retrieved:
    """Both candidate lists of one search and how they were produced."""

    keyword: list[Candidate]
    vector: list[Candidate]
    mode: SearchMode
    warnings: list[str]
    degraded: bool
    query_vec: Vector | None


@dataclass(frozen=True)
class Asked:
    """Whom a question asks about: the user's or the assistant's words (``kind`` "role"), or one or
    more people a conversation's lines name (``kind`` "name")."""

    kind: str
    wanted: str | frozenset[str]

    def label(self) -> str:
        if isinstance(self.wanted, str):
            return self.wanted
        return " and ".join(sorted(name.title() for name in self.wanted))


@dataclass
class Gathered:
    """Every candidate of one search with its evidence and score, before filtering and packing."""

    hits: list[Hit]
    mode: SearchMode
    warnings: list[str]
    degraded: bool
    stats: rel.QueryStats | None
    #: The query's mean cosine to every stored vector (None without vectors).
    topical: float | None = None
    #: Whose words the question asks about (search/speaker.py): a role or the people it names
    #: (None: it does not say).
    speaker: Asked | None = None
    #: The people the candidates' files name as speakers (search/speaker.py).
    people: frozenset[str] = frozenset()
    #: The steps left to do on a hit before its lines are read (supersession's head, packing):
    #: the named-speaker step where it cannot change a score (None: every hit had them).
    prepare: Callable[[Hit], None] | None = None


def cut_off(config: MemoryConfig, keyword_only: bool, requested: float | None) -> float:
    """The score below which hits are dropped, the same rule in every backend: ``minScore``, or, for
    a search on keywords alone, ``keywordOnlyMinScore`` (keyword evidence alone separates worse),
    unless the caller asked for another value than the configured ``minScore``."""
    q = config.query
    if requested is not None and requested != q.minScore:
        return requested
    return q.keywordOnlyMinScore if keyword_only else q.minScore


def general_gate(config: MemoryConfig, query: str, people: frozenset[str], requested: float | None,
                 mode: SearchMode) -> float | None:
    """The score a search's best hit must reach for it to answer at all, when ``query`` is a general
    question (search/speaker.py ``general_question``); None when no gate applies: a lookup, a question
    about someone, a caller's own ``min_score``, or a search on keywords alone (keyword evidence
    cannot tell "what is the cat called?" over a small memory from an off-topic question: measured
    in docs/retrieval.md). A search with a hit that matches words specific to this memory
    (``SPECIFIC_MASS``) is never gated either. The same rule in every backend."""
    q = config.query
    if (requested is not None and requested != q.minScore) or mode in ("keyword-only", "file-scan"):
        return None
    return q.generalMinScore if general_question(query, people) else None


def candidate_limit(config: MemoryConfig, max_results: int, as_of: datetime | None = None) -> int:
    """How many candidates each retriever (keywords, vectors) returns for one search; twice as many
    for an as-of search, which then leaves out what was written later."""
    limit = min(400, max(max_results * config.query.hybrid.candidateMultiplier, 60))
    return 2 * limit if as_of is not None else limit


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


def retrieve(
    db: IndexDB,
    config: MemoryConfig,
    plan: SearchPlan,
    embed_query: Callable[[str], list[float]] | None,
    vector_search: VectorSearch | None,
    degraded_reasons: list[str],
    vector_languages: Sequence[str] | None = None,
) -> Retrieved:
    """The builtin index's keyword and vector candidates for ``plan``."""
    return Retrieval(db, config, plan, embed_query, vector_search, degraded_reasons, vector_languages).finish()


class Retrieval:
    """One search's retrieval, begun: the keyword candidates are found and the query's embedding is
    on its way (search/ahead.py); :meth:`finish` waits for it and runs the vector side. What needs
    only the keyword candidates can be done between the two (``run_search``). ``started``:
    ``embed_query(plan.query)`` begun already, used instead of beginning it here."""

    def __init__(self, db: IndexDB, config: MemoryConfig, plan: SearchPlan, embed_query: Callable[[str], list[float]] | None,
                 vector_search: VectorSearch | None, degraded_reasons: list[str],
                 vector_languages: Sequence[str] | None, started: QueryEmbedding | None = None) -> None:  # fmt: skip
        q = config.query
        self.db, self.config, self.plan, self.vector_search = db, config, plan, vector_search
        self.warnings = list(degraded_reasons)
        self.degraded = bool(degraded_reasons)
        self.limit = candidate_limit(config, plan.max_results, plan.as_of)
        self.fts = db.caps.fts_available
        # The chunk count, kept per version of the chunks: a small index's terms need no counting.
        self.chunks = indexed_chunks(db, q.fts.tokenizer) if self.fts else None
        self.use_vectors = embed_query is not None and vector_search is not None
        skip_reason = vector_skip_reason(config, plan.query, vector_languages) if self.use_vectors else None
        if skip_reason is not None:
            self.warnings.append(skip_reason)
            self.use_vectors = False
        #: The query's embedding, made while the keyword side works (None: no vector side).
        self.pending: QueryEmbedding | None = None
        if self.use_vectors and embed_query is not None:
            self.pending = started if started is not None else QueryEmbedding(embed_query, plan.query)
        self.keyword: list[Candidate] = []
        self._searched = self.fts and (q.hybrid.enabled or not self.use_vectors)
        if self._searched:
            self.keyword = self._keyword_search()

    def _keyword_search(self) -> list[Candidate]:
        q, plan = self.config.query, self.plan
        return keyword_search(self.db, plan.query, self.limit, plan.scope, q.fts.tokenizer, self.chunks)

    def finish(self) -> Retrieved:
        q, plan = self.config.query, self.plan
        vector: list[Candidate] = []
        query_vec: Vector | None = None
        if self.pending is not None and self.vector_search is not None:
            import numpy as np  # the vector side only: keyword-only searches never load numpy

            try:
                query_vec = np.asarray(self.pending.result(), dtype=np.float32)
            except Exception as exc:  # any provider failure degrades this query to keywords
                self.warnings.append(f"query embedding failed, answered by keyword search only: {exc}")
                self.degraded = True
                self.use_vectors = False
                query_vec = None
            else:
                if np.any(query_vec):
                    vector = self.vector_search(self.db, query_vec, self.limit, plan.scope)
                else:
                    query_vec = None
        if self.fts and not self.use_vectors and not self._searched:
            self.keyword = self._keyword_search()  # the vector side failed: keywords answer instead

        if self.use_vectors and self.fts and q.hybrid.enabled:
            mode: SearchMode = "hybrid"
        elif self.use_vectors:
            mode = "vector-only"
        elif self.fts:
            mode = "keyword-only"
        else:
            mode = "file-scan"
            self.keyword = scan_search(self.db, plan.query, self.limit, plan.scope)
        return Retrieved(self.keyword, vector, mode, self.warnings, self.degraded, query_vec)


def _knn_matrix(vector_search: VectorSearch | None) -> Vector | None:
    # The in-memory KNN already holds every vector as one matrix: the corpus centroid comes from it.
    owner = getattr(vector_search, "__self__", None)
    matrix = getattr(owner, "_matrix", None) if owner is not None else None
    if matrix is None:
        return None
    import numpy as np

    return matrix if isinstance(matrix, np.ndarray) and matrix.ndim == 2 else None


def _model_of(embed_query: Callable[[str], list[float]] | None) -> str | None:
    model = getattr(getattr(embed_query, "__self__", None), "model", None)
    return model if isinstance(model, str) else None


def run_search(
    db: IndexDB,
    config: MemoryConfig,
    plan: SearchPlan,
    embed_query: Callable[[str], list[float]] | None,
    vector_search: VectorSearch | None,
    degraded_reasons: list[str],
    vector_languages: Sequence[str] | None = None,
    model: str | None = None,
    started: QueryEmbedding | None = None,
) -> SearchOutcome:
    """``vector_languages``: what the embedding model reads (None: unknown or many); ``model``: the
    embedding model's name, which picks its cosine calibration (default: the provider's ``model``);
    ``started``: ``embed_query(plan.query)`` begun already (the manager starts it first thing)."""
    retrieval = Retrieval(db, config, plan, embed_query, vector_search, degraded_reasons, vector_languages, started)
    early: KeywordSide | None = None
    if retrieval.pending is not None and retrieval.keyword:
        # While the query is embedded: what scoring needs of the keyword candidates alone.
        early = keyword_side(config, plan, retrieval.keyword, index_corpus(db, config.query.fts.tokenizer),
                             retrieval.pending.due)  # fmt: skip
    found = retrieval.finish()
    corpus = index_corpus(db, config.query.fts.tokenizer, _knn_matrix(vector_search))
    return rank_candidates(
        config, plan, found.keyword, found.vector, found.mode, found.warnings, found.degraded,
        corpus=corpus, query_vec=found.query_vec, model=model or _model_of(embed_query), early=early,
    )  # fmt: skip


@dataclass
class KeywordSide:
    """What scoring needs of the keyword candidates alone (made while the query is embedded): the
    query's statistics, each keyword candidate's evidence, and their files' lines; and what
    supersession read ahead of them (None: nothing). Scoring computes the same for the candidates
    not here."""

    stats: rel.QueryStats
    #: Each keyword candidate's evidence, its ``line_terms`` those of the body's lines (as scoring
    #: narrows them), and those lines' query-term weights.
    evidence: dict[int, rel.KeywordEvidence]
    weights: dict[int, list[float]]
    files: CandidateFiles | None
    reading: Reading | None = None
    #: The named-speaker step as asked of the keyword candidates' people, with what it found of
    #: the best of them (None: nobody asked about, or not begun).
    asking: _Asking | None = None


def keyword_side(config: MemoryConfig, plan: SearchPlan, keyword: Sequence[Candidate], corpus: Corpus,
                 due: Callable[[], bool] | None = None) -> KeywordSide:  # fmt: skip
    """``due``: whether the query's embedding is done or due (``QueryEmbedding.due``): until then,
    what scoring and supersession will do with the best keyword candidates (the likely head of the
    ranking) is done ahead: the named-speaker step, then the statements supersession compares.
    After, that work would only delay the search. What is done ahead is kept whatever comes of it
    and used only where its inputs turn out the same, so the results are the same either way; a
    candidate that ends up out of the head only cost the core that would otherwise wait."""
    stats = rel.query_stats(plan.query, corpus)
    texts = corpus.indexed_texts([c.rowid for c in keyword])
    ref_length = _ref_length(config)
    evidence: dict[int, rel.KeywordEvidence] = {}
    weights: dict[int, list[float]] = {}
    for c in keyword:
        if c.rowid not in evidence:
            ev = evidence[c.rowid] = rel.evidence(stats, texts.get(c.rowid, c.text), ref_length, corpus)
            ev.line_terms = _body_terms(ev, c.text)
            weights[c.rowid] = _line_weights(ev.line_terms, stats.idf)
    files = _candidate_files(keyword, plan.line_lengths)
    if due is None:
        return KeywordSide(stats, evidence, weights, files)
    # The likely head as scoring will make its hits (transcripts' lines need their messages, read
    # with every hit's later: not here).
    head = [Hit(c.rowid, c.path, c.source, c.start_line, c.end_line, c.text, evidence=evidence[c.rowid],
                line_weights=weights[c.rowid]) for c in keyword[:HEAD] if c.source != "sessions"]  # fmt: skip
    asking = None
    if config.query.speakers and head:
        asking = _asking(plan.query, stats, corpus, _people(files))
        if asking is not None:
            for hit in head:  # first: it can move the line a statement is read from
                if due():
                    break
                _speaker_ahead(hit, asking, files)
    reading = None
    if config.query.supersession.enabled and config.query.supersession.detect:
        # A statement, its time and the verdict of a pair not read before are most of
        # supersession's time after the vector side, and the head is mostly these.
        reading = Reading(stats, corpus.tokens, plan.times)
        reading.ahead(head, due)
    return KeywordSide(stats, evidence, weights, files, reading, asking)


def _body_terms(ev: rel.KeywordEvidence, text: str) -> list[tuple[int, ...]]:
    """The query terms of each line of a chunk's body: its indexed text starts with the heading
    trail, so the body's lines are the last ones."""
    body_lines = text.count("\n") + 1
    return list(ev.line_terms[-body_lines:]) if len(ev.line_terms) >= body_lines else [()] * body_lines


def _line_weights(terms: Sequence[tuple[int, ...]], idf: Sequence[float]) -> list[float]:
    # sum() of a line without terms is the int 0, as before; most lines hold none
    return [sum(idf[i] for i in t) if t else 0 for t in terms]


def _ref_length(config: MemoryConfig) -> int:
    # BM25's length normalisation against the configured chunk size (in estimated tokens), a
    # constant: the corpus's own average would move every score whenever a note is added.
    return max(8, config.chunking.tokens)


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
    """Every scored candidate of one builtin search, unfiltered (benchmarks/calibrate.py fits on them)."""
    found = retrieve(db, config, plan, embed_query, vector_search, degraded_reasons, vector_languages)
    corpus = index_corpus(db, config.query.fts.tokenizer, _knn_matrix(vector_search))
    return score_candidates(config, plan, found.keyword, found.vector, found.mode, found.warnings, found.degraded,
                            corpus, found.query_vec, model or _model_of(embed_query))  # fmt: skip


def score_candidates(
    config: MemoryConfig,
    plan: SearchPlan,
    keyword: list[Candidate],
    vector: list[Candidate],
    mode: SearchMode,
    warnings: list[str],
    degraded: bool,
    corpus: Corpus,
    query_vec: Vector | None,
    model: str | None,
    passing: float | None = None,
    early: KeywordSide | None = None,
) -> Gathered:
    """One entry per candidate chunk with its calibrated evidence and score, best first.

    ``passing``: the score a hit must reach to be kept (``cut_off``) when nothing but the hits that
    reach it or the head of the ranking (``supersede.HEAD``) is ever read: the named-speaker step
    (which can only lower a score) then skips the hits that can reach neither. None: every hit gets
    every step (``gather``, whose callers read them all). ``early``: the keyword candidates' part,
    made before (``run_search``) with this corpus and plan."""
    q = config.query
    hits: dict[int, Hit] = {}
    for c in keyword + vector:  # keyword candidates first: theirs is the better-calibrated evidence
        if c.rowid not in hits:
            hits[c.rowid] = Hit(c.rowid, c.path, c.source, c.start_line, c.end_line, c.text)
    for c in vector:
        hits[c.rowid].cosine = c.score
    for rank, c in enumerate(keyword, 1):
        hits[c.rowid].keyword_rank = rank
        hits[c.rowid].text_score = c.score

    stats: rel.QueryStats | None = None
    use_keywords = mode != "vector-only"
    made = early.evidence if early is not None else {}
    made_weights = early.weights if early is not None else {}
    if hits:
        stats = early.stats if early is not None else rel.query_stats(plan.query, corpus)
        rest = [rowid for rowid in hits if rowid not in made]
        texts = corpus.indexed_texts(rest) if mode != "file-scan" and rest else {}
        ref_length = _ref_length(config)
        idf = stats.idf
        for hit in hits.values():
            ev = made.get(hit.rowid)
            if ev is None:
                ev = rel.evidence(stats, texts.get(hit.rowid, hit.text), ref_length, corpus)
                ev.line_terms = _body_terms(ev, hit.text)
                hit.line_weights = _line_weights(ev.line_terms, idf)
            else:  # narrowed and weighed while the query was embedded (keyword_side)
                hit.line_weights = made_weights[hit.rowid]
            hit.evidence = ev
    sessions = [rowid for rowid, h in hits.items() if h.source == "sessions" and h.end_line > h.start_line]
    if sessions:
        for rowid, numbers in corpus.line_numbers(sessions).items():
            hit = hits[rowid]
            if len(numbers) == hit.text.count("\n") + 1 and numbers[0] == hit.start_line and numbers[-1] == hit.end_line:
                hit.line_map = numbers
    if query_vec is not None and hits:
        missing = [rowid for rowid, h in hits.items() if h.cosine is None]
        if missing:
            for rowid, cos in corpus.cosines(query_vec, missing).items():
                if rowid in hits:
                    hits[rowid].cosine = cos

    files = _candidate_files(list(hits.values()), plan.line_lengths, early.files if early is not None else None)
    people = _people(files)
    asking = _asking(plan.query, stats, corpus, people) if q.speakers and hits else None
    if asking is not None and early is not None and early.asking is not None and early.asking.asked == asking.asked:
        asking = early.asking  # the same people asked about, with the same statistics: the same step, part done
    wanted = asking.asked if asking is not None else None
    topical = corpus.mean_cosine(query_vec) if query_vec is not None and hits else None
    vmodel = rel.vector_model(model)
    dates = query_dates(plan.query, plan.now) if q.dates.enabled else []
    for hit in hits.values():
        k_logit = rel.keyword_logit(hit.evidence) if use_keywords and hit.evidence is not None else None
        v_logit = (rel.vector_logit(hit.cosine, vmodel, topical)
                   if hit.cosine is not None and mode in ("hybrid", "vector-only") else None)  # fmt: skip
        if mode == "hybrid":
            logit = rel.fused_logit(k_logit, v_logit)
        elif mode == "vector-only":
            logit = v_logit if v_logit is not None else _NO_EVIDENCE
        else:
            logit = k_logit if k_logit is not None else _NO_EVIDENCE
        hit.keyword_logit, hit.vector_logit = k_logit, v_logit
        if dates:
            hit.date_boost = date_logit(hit.path, hit.source, dates, q.dates.boost, q.dates.nearbyDays)
            logit += hit.date_boost
        hit.logit = logit
        hit.score = rel.SCALE.score(logit)
    prepare: _Deferred | None = None
    if asking is not None:
        offset = rel.SPEAKER_OFFSET if asking.asked.kind == "role" else rel.NAMED_SPEAKER_OFFSET.get(mode, 0.0)
        if offset or passing is None:
            _speak(hits.values(), asking, files, offset, passing)
        else:  # no score changes: only the lines of the hits read later need it
            prepare = _Deferred(asking, files, hits.values())
    ordered = sorted(hits.values(), key=lambda h: h.score, reverse=True)
    return Gathered(ordered, mode, warnings, degraded, stats, topical, wanted, people, prepare)


def rank_candidates(
    config: MemoryConfig,
    plan: SearchPlan,
    keyword: list[Candidate],
    vector: list[Candidate],
    mode: SearchMode,
    warnings: list[str],
    degraded: bool,
    *,
    corpus: Corpus | None = None,
    query_vec: Vector | None = None,
    model: str | None = None,
    early: KeywordSide | None = None,
) -> SearchOutcome:
    """Everything after retrieval: score, order, decay, filter, diversify, narrow, pack, cite.

    Shared by every engine that retrieves its own candidates. ``corpus`` answers the statistics
    scores need from that engine's store (without one they are estimated from the candidates,
    :class:`~mdrecall.search.corpus.CandidateCorpus`); ``query_vec`` is the query's embedding
    (for the cosines of keyword-only candidates and the topical statistic); ``model`` the
    embedding model's name, which picks its cosine calibration; ``early`` what scoring needs of the
    keyword candidates, made while the query was embedded (``keyword_side``, with this corpus).
    """
    q = config.query
    scoring = corpus if corpus is not None else CandidateCorpus(keyword, vector)
    marks: list[Mark] | None = None
    if q.supersession.enabled:
        marks = scoring.marks() if isinstance(scoring, MarkupSource) else collect(_rows(keyword + vector))
    keep = _passing(config, plan, mode, marks, keyword + vector)
    found = score_candidates(config, plan, keyword, vector, mode, list(warnings), degraded, scoring, query_vec, model,
                             keep, early if scoring is corpus else None)  # fmt: skip
    hits = found.hits
    warnings = found.warnings
    later_only = False
    if plan.as_of is not None:
        known = known_then(hits, plan.as_of, plan.times)
        warnings.extend(known.warnings(plan.as_of))
        later_only = bool(hits) and not known.kept
        hits = known.kept

    if q.hybrid.fusion == "rrf" and found.mode == "hybrid":
        _rank_fuse(hits, q.hybrid.vectorWeight, q.hybrid.textWeight, q.hybrid.rrfK)

    links: list[Link] = []
    if q.supersession.enabled and hits:
        if found.prepare is not None:
            for h in hits[:HEAD]:
                found.prepare(h)
        if not isinstance(scoring, MarkupSource):  # the marks of the hits, in their order
            marks = collect(_rows(hits))
        ctx = Context(found.stats, scoring.tokens, plan.times, q.supersession.margin, q.supersession.detect,
                      marks or [], plan.scope, plan.as_of, early.reading if early is not None else None)  # fmt: skip
        links = supersede(hits, ctx)

    relevance = {id(h): h.score for h in hits}
    gated = False
    if q.temporalDecay.enabled:
        for h in hits:
            h.decay = decay_multiplier(h.path, h.source, plan.now, q.temporalDecay.halfLifeDays)
            h.score *= h.decay
        hits.sort(key=lambda h: h.score, reverse=True)
        enforce(hits, links)  # decay must not put a superseded statement back above its replacement

    min_score = cut_off(config, found.mode in ("keyword-only", "file-scan"), plan.min_score)
    passing = [h for h in hits if h.score >= min_score]
    if not passing and q.temporalDecay.enabled:
        # Decay must not hide the only answer: fall back to hits relevant before decay.
        passing = [h for h in hits if relevance[id(h)] >= min_score]
    general = general_gate(config, plan.query, found.people, plan.min_score, found.mode)
    if passing and general is not None and not any(h.evidence is not None and h.evidence.mass >= SPECIFIC_MASS for h in passing):
        best = max(relevance[id(h)] for h in passing)
        if best < general:
            warnings.append(f"nothing relevant: a general question (about no one in this memory) is answered only when "
                            f"its best hit scores at least generalMinScore {general:g} (best {best:.3f})")  # fmt: skip
            passing, gated = [], True

    if q.mmr.enabled and len(passing) > 1:
        head = passing[: max(q.mmr.candidates, plan.max_results)]
        passing = mmr_rerank(head, lambda h: h.score, lambda h: h.text, q.mmr.lambda_, key=lambda h: h.rowid,
                             normalise=False)  # fmt: skip
        enforce(passing, links)

    reason = None
    if not passing:
        reason = NOTHING_RELEVANT if hits or later_only else NO_CANDIDATES
        if later_only and plan.as_of is not None:
            warnings.append(f"nothing relevant: nothing known as of {plan.as_of.isoformat(timespec='minutes')} matched")
        elif hits and not gated:  # a gated search has said why
            warnings.append(
                f"nothing relevant: no memory scored at least minScore {min_score:g} (best {hits[0].score:.3f})"
            )
    packed = pack(passing, plan.max_results, q.maxInjectedChars, q.snippet.contextLines, q.snippet.narrowAboveChars,
                  corpus, plan.line_lengths, found.prepare)  # fmt: skip
    results = [
        SearchHit(
            path=h.path,
            start_line=h.start_line,
            end_line=h.end_line,
            score=round(min(1.0, max(0.0, h.score)), 6),
            snippet=h.text,
            source=h.source,
            citation=format_citation(h.path, h.start_line, h.end_line),
            vector_score=h.cosine,
            text_score=h.text_score,
            explanation=explain(h, found, q.debugScores),
            superseded_by=h.superseded_by,
        )
        for h in packed
    ]
    return SearchOutcome(results, found.mode, warnings, found.degraded, reason)


def _rows(hits: Iterable[Hit | Candidate]) -> list[ChunkRow]:
    return [(h.rowid, h.path, h.source, h.start_line, h.end_line, h.text) for h in hits]


def _passing(config: MemoryConfig, plan: SearchPlan, mode: SearchMode, marks: list[Mark] | None,
             candidates: Sequence[Candidate]) -> float | None:
    """The cut-off for ``score_candidates`` to skip steps on hits that can reach neither the results
    nor supersession's head, or None where a hit below both may still be read: an as-of search
    (filtered before the head is taken), rank fusion (orders by every hit), temporal decay (it
    re-orders every hit, and "nothing relevant" quotes the best decayed score), or a supersedes mark
    aimed at a candidate's file (any hit it names is marked, wherever it ranks)."""
    q = config.query
    if plan.as_of is not None or q.hybrid.fusion == "rrf" or q.temporalDecay.enabled:
        return None
    if marks:
        paths = {c.path for c in candidates}
        if any(m.target in paths for m in marks):
            return None
    return cut_off(config, mode in ("keyword-only", "file-scan"), plan.min_score)


#: Each candidate file's lines for one search, by (path, source); None: the file cannot be read.
CandidateFiles = dict[tuple[str, str], FileLines | None]


def _candidate_files(hits: Sequence[Hit | Candidate], lengths: LineLengths | None,
                     known: CandidateFiles | None = None) -> CandidateFiles | None:  # fmt: skip
    """The candidates' files, asked of the cache once per search (each ask costs a ``stat``): the
    people step and the speaker step both read them. None: no file-line cache to ask. ``known``:
    those asked already this search (the keyword candidates', ``keyword_side``)."""
    if not isinstance(lengths, FileLineLengths):
        return None
    files: CandidateFiles = {}
    for hit in hits:
        key = (hit.path, hit.source)
        if key not in files:
            files[key] = known[key] if known is not None and key in known else lengths.names(hit.path, hit.source)
    return files


def _people(files: CandidateFiles | None) -> frozenset[str]:
    """The names that label at least two lines of the candidates' files: the people speaking there."""
    if not files:
        return frozenset()
    return speaker_names(found.people for found in files.values() if found is not None)


@dataclass
class _Asking:
    """What the named-speaker step of one search knows before it looks at any hit."""

    asked: Asked
    #: Whether a line holds the question's words besides the asked names (None: nothing to hold).
    holds: Callable[[str], bool] | None = None
    #: The query terms that are an asked name (their weight leaves the lines' weights).
    named: frozenset[int] = frozenset()
    idf: Sequence[float] = ()
    #: Whether a line asks, per line text (chunks overlap: lines recur).
    asks: dict[str, bool] = field(default_factory=dict)
    #: The step's outcome on hits made ahead (``keyword_side``), by rowid: the line weights it was
    #: given and those it left, ``other_speaker`` and ``stated_by``.
    spoken: dict[int, tuple[list[float], list[float], bool, str | None]] = field(default_factory=dict)


def _asking(query: str, stats: rel.QueryStats | None, corpus: Corpus, people: frozenset[str]) -> _Asking | None:
    """Whom the question asks about (search/speaker.py): people of a conversation that it names;
    else, in the first person, the user's words; recalling "what you said", the assistant's.
    None: nobody in particular."""
    names = asked_names(query, people)
    if names:
        if stats is None:
            return _Asking(Asked("name", names))
        # The asked person's name is on every line they speak: which line states the fact is
        # told by the question's other words.
        named = frozenset(i for i, term in enumerate(stats.terms) if asked_names(term.title(), names))
        kept = replace(stats, forms=[f for i, f in enumerate(stats.forms) if i not in named],
                       cjk=[c for i, c in enumerate(stats.cjk) if i not in named])  # fmt: skip
        holds = (lambda text: rel.holds_terms(kept, text, corpus)) if kept.forms else None
        return _Asking(Asked("name", names), holds, named, stats.idf)
    role = asked_speaker(query)
    return _Asking(Asked("role", role)) if role is not None else None


def _speak(hits: Iterable[Hit], asking: _Asking, files: CandidateFiles | None, offset: float,
           passing: float | None) -> None:
    """The named-speaker step for each hit that can still matter, best first (see ``_speaker``).

    The step only ever lowers a score (``offset`` <= 0), so a hit whose score before it is below
    both ``passing`` and the ``HEAD``-th best score after it of the hits already done can reach
    neither the results nor supersession's head: it and every later one are left as they are (they
    are never read). ``passing`` None: every hit."""
    ordered = sorted(hits, key=lambda h: h.score, reverse=True)
    done: list[float] = []  # a min-heap of the best HEAD scores after the step
    for hit in ordered:
        if (passing is not None and len(done) >= HEAD and hit.score < done[0] - _SCORE_SLACK
                and hit.score < passing - _SCORE_SLACK):  # fmt: skip
            return
        if _speaker(hit, asking, files) and offset:
            hit.speaker_logit = offset
            hit.logit += offset
            hit.score = rel.SCALE.score(hit.logit)
        if len(done) < HEAD:
            heapq.heappush(done, hit.score)
        elif hit.score > done[0]:
            heapq.heapreplace(done, hit.score)


class _Deferred:
    """The named-speaker step where its offset is 0 (a hybrid search's question naming people): it
    changes no score, only which line of a hit states its fact (narrowing, supersession's
    statements), so it runs on a scored hit when one of those first reads it, never on the rest."""

    def __init__(self, asking: _Asking, files: CandidateFiles | None, hits: Iterable[Hit]) -> None:
        self.asking, self.files = asking, files
        self.pending = {id(h): h for h in hits}  # holds them: their ids stay theirs

    def __call__(self, hit: Hit) -> None:
        if self.pending.pop(id(hit), None) is hit:
            _speaker(hit, self.asking, self.files)


def _speaker(hit: Hit, asking: _Asking, files: CandidateFiles | None) -> bool:
    """Mark ``hit`` for the speaker the question asks about: the line it is narrowed to (and states
    its fact on) is that speaker's where it has one that matches, and a hit whose statement is
    another speaker's says so (``other_speaker``, returned: its score pays for it)."""
    known = asking.spoken.get(hit.rowid)
    if known is not None and known[0] is hit.line_weights:
        # Done ahead on this chunk from these very weights (its text, evidence and file the same
        # for one rowid within a search; never a transcript's, whose lines need their messages):
        # the same outcome.
        hit.line_weights, hit.other_speaker = known[1], known[2]
        if known[2]:
            hit.stated_by = known[3]
        return known[2]
    asked = asking.asked
    if asking.named and hit.evidence is not None and len(hit.evidence.line_terms) == len(hit.line_weights):
        idf, named = asking.idf, asking.named
        # most lines hold no query term: their 0 without a generator (the same int 0 sum() gives)
        hit.line_weights = [sum(idf[i] for i in terms if i not in named) if terms else 0 for terms in hit.evidence.line_terms]
    if hit.source == "sessions" and hit.line_map is None:
        hit.line_map = message_map(hit.text, hit.start_line, hit.end_line)
    numbers = _line_numbers(hit)
    lines = _file_lines(files, hit, numbers) if files is not None and numbers is not None else None
    if lines is not None and numbers is not None:
        labels = lines.names if asked.kind == "name" else lines.speakers
        # A question states a fact of whoever answers it, in a conversation between people; a
        # user's question to an assistant often states the user's own ("we fly to Lisbon on
        # Friday: what should I pack?"), so roles keep their lines' own speakers.
        speakers: list[str | None] = (_stating(hit, numbers, labels, lines.lengths, asking.holds, asking.asks)
                                      if asked.kind == "name" else [labels[n - 1] for n in numbers])  # fmt: skip
    elif asked.kind == "role":
        speakers = list(line_speakers(hit.text, hit.source, hit.line_map))
    else:
        return False
    if hit.line_weights and "\n" in hit.text:
        hit.line_weights = prefer(hit.line_weights, speakers, asked.wanted)
    hit.other_speaker = other_speaker(hit.line_weights or [0.0] * len(speakers), speakers, asked.wanted)
    if hit.other_speaker:
        hit.stated_by = _stated_by(hit.line_weights, speakers, asked)
    return hit.other_speaker


def _speaker_ahead(hit: Hit, asking: _Asking, files: CandidateFiles | None) -> None:
    """``_speaker`` on a keyword candidate's hit made ahead, its outcome kept for the real hit."""
    given = hit.line_weights
    _speaker(hit, asking, files)
    asking.spoken[hit.rowid] = (given, hit.line_weights, hit.other_speaker, hit.stated_by)


def _line_numbers(hit: Hit) -> list[int] | None:
    """The file line (transcript message) of each line of the hit's text, or None when unknown."""
    count = hit.text.count("\n") + 1
    if hit.source == "sessions":
        return list(hit.line_map) if hit.line_map is not None and len(hit.line_map) == count else None
    if hit.end_line - hit.start_line + 1 == count:
        return list(range(hit.start_line, hit.end_line + 1))
    return [hit.start_line] * count if hit.start_line == hit.end_line else None


def _file_lines(files: CandidateFiles, hit: Hit, numbers: list[int]) -> FileLines | None:
    found = files.get((hit.path, hit.source))
    if found is None or (numbers and (min(numbers) < 1 or max(numbers) > len(found.names))):
        return None
    return found


def _stating(hit: Hit, numbers: list[int], labels: Sequence[str | None], lengths: Sequence[int],
             holds: Callable[[str], bool] | None, asks_memo: dict[str, bool]) -> list[str | None]:
    """Per line of the hit, whose statement it carries: its speaker's, except for a question, which
    states nothing itself: it carries the statement of whoever answers it on the next line (message)
    of the file ("Caroline: how long have you been married?" / "Melanie: 5 years")."""
    texts = hit.text.split("\n")
    own = [labels[n - 1] for n in numbers]
    asks: set[int] = set()
    last = len(numbers) - 1
    for i, n in enumerate(numbers):
        if i == last or numbers[i + 1] != n:  # a message's last line ends its question
            text = texts[i]
            if "?" not in text:  # is_question's own first test: most lines, told without a call
                continue
            question = asks_memo.get(text)
            if question is None:
                question = asks_memo[text] = is_question(text, holds)
            if question:
                asks.add(n)
    if not asks:
        return own
    out: list[str | None] = []
    for n, label in zip(numbers, own):
        if n in asks:
            nxt = n + 1
            while nxt <= len(lengths) and lengths[nxt - 1] == 0:  # blank lines between turns
                nxt += 1
            answer = labels[nxt - 1] if nxt <= len(labels) else None
            label = answer if answer is not None else label
        out.append(label)
    return out


def _stated_by(weights: Sequence[float], speakers: Sequence[str | None], asked: Asked) -> str | None:
    top = max(weights) if weights else 0
    if top > 0 and len(weights) == len(speakers):
        best = weights.index(top)  # the first line of the best weight
        label = speakers[best]
    else:
        label = next((s for s in speakers if s is not None), None)
    if label is None:
        return None
    return label if asked.kind == "role" else label.title()


def _rank_fuse(hits: list[Hit], vector_weight: float, text_weight: float, k: int) -> None:
    """``fusion: rrf``: order by reciprocal-rank fusion, keeping each hit's calibrated score."""
    keyword = [Candidate(h.rowid, h.path, h.source, h.start_line, h.end_line, h.text, h.text_score or 0.0)
               for h in sorted((h for h in hits if h.keyword_rank), key=lambda h: h.keyword_rank or 0)]  # fmt: skip
    vector = [Candidate(h.rowid, h.path, h.source, h.start_line, h.end_line, h.text, h.cosine or 0.0)
              for h in sorted((h for h in hits if h.cosine is not None), key=lambda h: -(h.cosine or 0.0))]  # fmt: skip
    order = {s.rowid: i for i, s in enumerate(rrf_fusion(keyword, vector, vector_weight, text_weight, k))}
    hits.sort(key=lambda h: order.get(h.rowid, len(order)))


def _reads_cjk(languages: Sequence[str]) -> bool:
    return any(lang in ("zh", "ja", "ko", "multilingual") for lang in languages)


__all__ = [
    "NOTHING_RELEVANT", "NO_CANDIDATES", "Asked", "Gathered", "KeywordSide", "Retrieval", "Retrieved", "SearchOutcome",
    "SearchPlan", "VectorSearch", "candidate_limit", "cut_off", "explain", "general_gate", "gather", "keyword_side",
    "rank_candidates", "retrieve", "run_search", "score_candidates", "vector_skip_reason",
]  # fmt: skip
