"""Absolute relevance: each hit's score is a calibrated probability that it holds what was asked.

Rank-relative scores (each list divided by its own best) make the top hit score ~1 for any query,
so ``minScore`` could never say "nothing relevant". Here every score is a function of the query,
the hit and corpus statistics only, never of the other hits:

* keyword evidence: the query's content terms are weighted by inverse document frequency over the
  whole index (a term the index has never seen weighs most: the query asks about something absent);
  ``coverage`` is the share of that weight the hit matches, ``bm25`` the same with BM25's saturating
  term frequency and length normalisation (relative to the configured chunk size, not to the other
  hits), ``mass`` the matched weight in units of the rarest possible term;
* vector evidence: the cosine, mapped per model by a fitted offset and scale (models differ widely:
  MiniLM's unrelated texts sit near 0.1–0.3, e5's near 0.75–0.8);
* a logistic model turns the evidence into P(relevant); hybrid search adds both logits with their
  own weights, so keyword-only, vector-only and hybrid scores all estimate the same probability.

The coefficients were fitted by logistic regression on the development benchmarks (label: the chunk
holds a gold line), see ``benchmarks/calibrate.py`` and docs/retrieval.md.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mdrecall.text import CJK_CHAR, query_terms, term_stems, word_tokens

K1, B = 1.2, 0.75


@dataclass(frozen=True, slots=True)
class KeywordModel:
    intercept: float
    coverage: float
    bm25: float
    mass: float
    known: float = 0.0


@dataclass(frozen=True, slots=True)
class VectorModel:
    """Per embedding model: ``logit = intercept + cosine·c + topical·t``. Cosines of different
    models live on different scales, hence one fit per model; ``topical`` is the query's mean
    cosine to the whole memory (see :class:`Centroids`)."""

    intercept: float
    cosine: float
    topical: float = 0.0


@dataclass(frozen=True, slots=True)
class FusionModel:
    intercept: float
    keyword: float
    vector: float


@dataclass(frozen=True, slots=True)
class ScoreScale:
    """How a logit is shown as a score in [0, 1]: ``score = sigmoid((logit − pivot)/spread + logit(anchor))``.

    Monotone in the fitted probability, the same for every mode and model. ``pivot`` is the logit
    the development data put at the edge of "relevant" (the probability below which off-topic
    queries' best hits fall); it shows as ``anchor`` = 0.35, the documented default ``minScore``.
    """

    pivot: float
    spread: float
    anchor: float = 0.35
    #: logit(anchor), once: every hit of every search is scored.
    _anchor_logit: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_anchor_logit", math.log(self.anchor / (1 - self.anchor)))

    def score(self, logit: float) -> float:
        return sigmoid((logit - self.pivot) / self.spread + self._anchor_logit)

    def probability(self, score: float) -> float:
        """The fitted probability of relevance behind a shown score."""
        score = min(max(score, 1e-9), 1 - 1e-9)
        z = math.log(score / (1 - score)) - self._anchor_logit
        return sigmoid(z * self.spread + self.pivot)


# Fitted by benchmarks/calibrate.py (see docs/retrieval.md for the data and the fit).
KEYWORD_MODEL = KeywordModel(intercept=-7.993, coverage=1.486, bm25=5.385, mass=1.744, known=1.071)
VECTOR_MODELS: dict[str, VectorModel] = {
    "all-MiniLM-L6-v2": VectorModel(intercept=-5.627, cosine=11.055, topical=-7.11),
    # Fitted on LoCoMo daily (106k candidates, calibrate.py --providers none e5); e5's cosines sit
    # high and close together (unrelated texts ~0.75-0.8), hence the steep line.
    "multilingual-e5-small": VectorModel(intercept=-21.558, cosine=86.862, topical=-67.393),
}
#: Models nobody fitted: a conservative mapping for unit-normalised embeddings.
DEFAULT_VECTOR_MODEL = VectorModel(intercept=-6.5, cosine=10.0)
FUSION_MODEL = FusionModel(intercept=0.948, keyword=0.645, vector=0.429)
#: Logit added to a hit whose statement is the other speaker's than the question asks about
#: (search/speaker.py): fitted by benchmarks/calibrate.py (see docs/retrieval.md).
SPEAKER_OFFSET = -4.1
#: The same for a question naming one person of a conversation and a hit stating another's words,
#: by mode. Fitted by benchmarks/calibrate.py on LoCoMo (both layouts): -2.05 keyword-only, -1.30
#: hybrid; hybrid takes none because there the vector evidence already tells the people apart
#: (LoCoMo hybrid recall@budget 0.8305 / 0.8130 without it against 0.8293 / 0.8074 with it;
#: keyword-only 0.8201 -> 0.8259 daily with it).
NAMED_SPEAKER_OFFSET = {"keyword-only": -2.0, "file-scan": -2.0}
SCALE = ScoreScale(pivot=math.log(0.016 / 0.984), spread=2.0)


def idf_of(df: int, n: int) -> float:
    """Inverse document frequency, the always-positive form (Lucene's BM25): a term in every chunk
    still counts a little, so a small workspace where every note mentions the topic still matches."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def vector_model(model: str | None) -> VectorModel:
    if model is None:
        return DEFAULT_VECTOR_MODEL
    if model in VECTOR_MODELS:
        return VECTOR_MODELS[model]
    for name, fitted in VECTOR_MODELS.items():
        if model.endswith("/" + name) or model.endswith(name):
            return fitted
    return DEFAULT_VECTOR_MODEL


@dataclass
class QueryStats:
    """The query's content terms with their weights over the whole index."""

    terms: list[str]
    #: Per term, what must be found in a chunk: FTS stems (Latin) or a CJK string.
    forms: list[tuple[str, ...]]
    cjk: list[bool]
    idf: list[float]
    max_idf: float
    total_idf: float
    #: Share of the query's term weight that occurs anywhere in the index: a query about something
    #: the memory has never mentioned scores low whatever its best hit matches.
    known: float = 1.0
    #: FTS5's own idf (a term in half the chunks or more weighs ~0): what ranks like FTS5's bm25().
    bm25_idf: list[float] = field(default_factory=list)
    total_bm25_idf: float = 1.0

    @property
    def empty(self) -> bool:
        return not self.terms


@dataclass(slots=True)
class KeywordEvidence:
    coverage: float = 0.0
    bm25: float = 0.0
    mass: float = 0.0
    matched: tuple[int, ...] = ()
    #: The query's ``known`` share (a corpus statistic, the same for every hit of the query).
    known: float = 1.0
    #: Per line of the chunk text, the matched term indexes (for narrowing citations).
    line_terms: list[tuple[int, ...]] = field(default_factory=list)


class Tokens(Protocol):
    """Tokenises like the keyword index does (stems), so that query terms and chunk text compare."""

    def tokens(self, text: str) -> list[str]: ...


class TermStatistics(Tokens, Protocol):
    """What query statistics need from a corpus: its tokenizer, its size and document frequencies."""

    def chunk_count(self) -> int: ...

    def doc_freqs(self, terms: Sequence[str], forms: Sequence[tuple[str, ...]], cjk: Sequence[bool]) -> list[int]:
        """Per query term, how many chunks hold it. ``terms``: the query's terms as written;
        ``forms``: their stems (a phrase when a term stems to several tokens, the string for CJK)."""
        ...


def query_stats(query: str, corpus: TermStatistics) -> QueryStats:
    """The query's content terms with their weights over ``corpus``."""
    terms = query_terms(query)
    forms: list[tuple[str, ...]] = []
    cjk: list[bool] = []
    kept: list[str] = []
    for term in terms:
        if CJK_CHAR.match(term):
            forms.append((term,))
            cjk.append(True)
            kept.append(term)
            continue
        stems = tuple(corpus.tokens(term))
        if stems:
            forms.append(stems)
            cjk.append(False)
            kept.append(term)
    dfs = corpus.doc_freqs(kept, forms, cjk) if forms else []
    n = max(1, corpus.chunk_count(), *dfs)
    idf = [idf_of(df, n) for df in dfs]
    max_idf = idf_of(0, n)
    total = sum(idf)
    known = sum(w for w, df in zip(idf, dfs, strict=True) if df > 0) / total if total > 0 else 0.0
    bidf = [max(1e-6, math.log((n - df + 0.5) / (df + 0.5))) for df in dfs]
    return QueryStats(kept, forms, cjk, idf, max_idf, total, known, bidf, max(1e-6, sum(bidf)))


@dataclass(frozen=True, slots=True)
class TextProfile:
    """What keyword evidence needs of one text whatever the query: its lines, every stem's count,
    the token count, and per stem the lines holding it (bit ``k`` set: line ``k``; a mapping that may
    work a stem's out when first asked, :class:`LineMasks`). Computed once per text
    (:meth:`~mdrecall.search.corpus.IndexCorpus.profile` keeps them), so a search matches query
    terms against counts instead of tokenising every candidate again."""

    lines: tuple[str, ...]
    counts: dict[str, int]
    length: int
    line_masks: Mapping[str, int]


class LineMasks(Mapping[str, int]):
    """Per stem, the lines of a text holding it (bit ``k``: line ``k``), worked out for a stem when
    first asked, from the text's tokens and where each starts. Evidence asks only for the query's
    matched stems, a few of a text's ~40: a Python step per token building every stem's count and
    mask up front made profiling a text a search sees for the first time (every candidate at 1M
    chunks) ~25 µs instead of ~22 for 80 tokens, of which the tokenizer call is ~8
    (benchmarks/profile_cost.py)."""

    __slots__ = ("_found", "_newlines", "_starts", "_tokens")

    def __init__(self, tokens: list[str], starts: list[int], newlines: list[int]) -> None:
        #: The text's tokens in order, the byte offset each starts at, and its newlines' offsets.
        self._tokens, self._starts, self._newlines = tokens, starts, newlines
        self._found: dict[str, int] = {}

    def __getitem__(self, stem: str) -> int:
        found = self._found.get(stem)
        if found is not None:
            return found
        tokens, starts, newlines = self._tokens, self._starts, self._newlines
        mask, at = 0, -1
        try:
            while True:
                at = tokens.index(stem, at + 1)
                mask |= 1 << bisect_left(newlines, starts[at])  # its line: the newlines before it
        except ValueError:
            pass
        if not mask:
            raise KeyError(stem)
        self._found[stem] = mask  # (two threads asking at once store the same mask)
        return mask

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(self._tokens))  # each stem once, in order of first use

    def __len__(self) -> int:
        return len(set(self._tokens))


def text_profile(text: str, tokenizer: Tokens) -> TextProfile:
    lines = tuple(text.split("\n"))
    counts: dict[str, int] = {}
    masks: dict[str, int] = {}
    length = 0
    for k, line in enumerate(lines):
        toks = tokenizer.tokens(line)
        length += len(toks)
        bit = 1 << k
        for t in toks:
            counts[t] = counts.get(t, 0) + 1
            masks[t] = masks.get(t, 0) | bit
    return TextProfile(lines, counts, length, masks)


def evidence(stats: QueryStats, text: str, ref_length: float, tokenizer: Tokens) -> KeywordEvidence:
    """Keyword evidence of one chunk (its indexed text: heading trail and body). ``tokenizer`` may
    keep the texts' profiles (a ``profile(text)`` method, as IndexCorpus has)."""
    if stats.empty or stats.total_idf <= 0:
        return KeywordEvidence(known=0.0)
    cached = getattr(tokenizer, "profile", None)
    prof: TextProfile = cached(text) if cached is not None else text_profile(text, tokenizer)
    counts, lines = prof.counts, prof.lines
    has_cjk = any(stats.cjk)
    flat = text.replace(" ", "") if has_cjk else ""
    norm = K1 * (1 - B + B * prof.length / max(1.0, ref_length))
    matched: list[int] = []
    masks: list[int] = []
    sat_sum = 0.0
    idf, cjk, line_masks = stats.idf, stats.cjk, prof.line_masks
    for i, form in enumerate(stats.forms):
        if has_cjk and cjk[i]:
            tf = flat.count(form[0])
            if tf <= 0:
                continue
            mask = 0
            for k, line in enumerate(lines):
                if form[0] in line.replace(" ", ""):
                    mask |= 1 << k
        elif len(form) == 1:  # most terms: one stem
            tf = counts.get(form[0], 0)
            if tf <= 0:
                continue
            mask = line_masks[form[0]]
        else:
            tf = min(counts.get(s, 0) for s in form)
            if tf <= 0:
                continue
            mask = -1
            for s in form:
                mask &= line_masks[s]
        matched.append(i)
        masks.append(mask)
        sat_sum += idf[i] * tf * (K1 + 1) / (tf + norm)
    matched_idf = sum(stats.idf[i] for i in matched)
    per_line: list[tuple[int, ...]] = [()] * len(lines)
    if len(matched) == 1:
        only, mask = (matched[0],), masks[0]
        for k in range(len(lines)):
            if mask >> k & 1:
                per_line[k] = only
    elif matched:
        union = 0
        for mask in masks:
            union |= mask
        for k in range(len(lines)):
            if union >> k & 1:  # only lines holding a matched term get a tuple (most lines hold none)
                per_line[k] = tuple(i for i, mask in zip(matched, masks) if mask >> k & 1)
    return KeywordEvidence(
        coverage=matched_idf / stats.total_idf,
        bm25=sat_sum / ((K1 + 1) * stats.total_idf),
        mass=matched_idf / stats.max_idf,
        matched=tuple(matched),
        line_terms=per_line,
        known=stats.known,
    )


def holds_terms(stats: QueryStats, text: str, tokenizer: Tokens) -> bool:
    """Whether ``text`` holds any of the query's terms (as :func:`evidence` matches them)."""
    # Plain loops and set methods: asked per sentence of the candidates' questions, and the
    # generators cost more than the tokenising (7.6 -> 3.7 µs a call).
    present = set(tokenizer.tokens(text))
    flat: str | None = None
    for form, is_cjk in zip(stats.forms, stats.cjk, strict=True):
        if is_cjk:
            if flat is None:
                flat = text.replace(" ", "")
            if form[0] in flat:
                return True
        elif present.issuperset(form):
            return True
    return False


class FallbackTokens:
    """Word tokens with a light suffix stripper: for a corpus without an FTS5 tokenizer at hand."""

    def tokens(self, text: str) -> list[str]:
        return term_stems(word_tokens(text))


def keyword_logit(ev: KeywordEvidence, model: KeywordModel = KEYWORD_MODEL) -> float:
    return (model.intercept + model.coverage * ev.coverage + model.bm25 * ev.bm25 + model.mass * min(ev.mass, 3.0)
            + model.known * ev.known)


def vector_logit(cosine: float, model: VectorModel, topical: float | None = None) -> float:
    return model.intercept + model.cosine * cosine + (model.topical * topical if topical is not None else 0.0)


def fused_logit(k_logit: float | None, v_logit: float | None, model: FusionModel = FUSION_MODEL) -> float:
    if k_logit is None and v_logit is None:
        return -12.0
    if k_logit is None:
        return v_logit  # type: ignore[return-value]
    if v_logit is None:
        return k_logit
    return model.intercept + model.keyword * k_logit + model.vector * v_logit
