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
import threading
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import apsw
import numpy as np

from mdrecall.store.db import IndexDB
from mdrecall.text import CJK_CHAR, query_terms

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

    def score(self, logit: float) -> float:
        return sigmoid((logit - self.pivot) / self.spread + math.log(self.anchor / (1 - self.anchor)))

    def probability(self, score: float) -> float:
        """The fitted probability of relevance behind a shown score."""
        score = min(max(score, 1e-9), 1 - 1e-9)
        z = math.log(score / (1 - score)) - math.log(self.anchor / (1 - self.anchor))
        return sigmoid(z * self.spread + self.pivot)


# Fitted by benchmarks/calibrate.py (see docs/retrieval.md for the data and the fit).
KEYWORD_MODEL = KeywordModel(intercept=-7.993, coverage=1.486, bm25=5.385, mass=1.744, known=1.071)
VECTOR_MODELS: dict[str, VectorModel] = {
    "all-MiniLM-L6-v2": VectorModel(intercept=-5.627, cosine=11.055, topical=-7.11),
    "multilingual-e5-small": VectorModel(intercept=-35.0, cosine=40.0),
}
#: Models nobody fitted: a conservative mapping for unit-normalised embeddings.
DEFAULT_VECTOR_MODEL = VectorModel(intercept=-6.5, cosine=10.0)
FUSION_MODEL = FusionModel(intercept=0.948, keyword=0.645, vector=0.429)
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


class Analyzer:
    """Tokenises like the index (FTS5's porter + unicode61) and looks up document frequencies.

    One per connection; the tokenizer and the temporary fts5vocab table are made once.
    """

    def __init__(self, db: IndexDB, tokenizer: str = "unicode61") -> None:
        self.db = db
        self.kind = tokenizer
        self._tok = None
        self._vocab = False
        self._avgdl: tuple[object, float] | None = None
        if tokenizer == "unicode61" and db.caps.fts_available:
            try:
                self._tok = db.conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
            except apsw.Error:
                self._tok = None

    def tokens(self, text: str) -> list[str]:
        if self._tok is None:
            from mdrecall.text import word_tokens, _stem

            return [_stem(t) for t in word_tokens(text)]
        return list(
            self._tok(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False,
                      include_colocated=False)
        )

    def _ensure_vocab(self) -> bool:
        if not self._vocab:
            try:
                self.db.conn.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.mdrecall_vocab USING fts5vocab(main, chunks_fts, row)"
                )
                self._vocab = True
            except apsw.Error:
                return False
        return True

    def doc_freqs(self, forms: list[tuple[str, ...]], cjk: list[bool]) -> list[int]:
        out = []
        use_vocab = self._tok is not None and self._ensure_vocab()
        for form, is_cjk in zip(forms, cjk):
            try:
                if use_vocab and not is_cjk and len(form) == 1:
                    row = self.db.conn.execute("SELECT doc FROM temp.mdrecall_vocab WHERE term = ?", (form[0],)).fetchone()
                    out.append(int(row[0]) if row else 0)
                    continue
                phrase = " ".join(form[0]) if is_cjk and self.kind == "unicode61" else " ".join(form)
                row = self.db.conn.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", ('"' + phrase.replace('"', "") + '"',)
                ).fetchone()
                out.append(int(row[0]) if row else 0)
            except apsw.Error:
                out.append(0)
        return out

    def query_stats(self, query: str, total_chunks: int) -> QueryStats:
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
            stems = tuple(self.tokens(term))
            if stems:
                forms.append(stems)
                cjk.append(False)
                kept.append(term)
        n = max(1, total_chunks)
        dfs = self.doc_freqs(forms, cjk) if forms else []
        idf = [idf_of(df, n) for df in dfs]
        max_idf = idf_of(0, n)
        total = sum(idf)
        known = sum(w for w, df in zip(idf, dfs) if df > 0) / total if total > 0 else 0.0
        bidf = [max(1e-6, math.log((n - df + 0.5) / (df + 0.5))) for df in dfs]
        return QueryStats(kept, forms, cjk, idf, max_idf, total, known, bidf, max(1e-6, sum(bidf)))

    def average_length(self, total_chunks: int) -> float:
        """Mean tokens per indexed chunk (BM25's avgdl), cached until the index changes."""
        version = (self.db.chunks_version(), total_chunks)
        if self._avgdl is not None and self._avgdl[0] == version:
            return self._avgdl[1]
        value = 150.0
        if self._tok is not None and self._ensure_vocab() and total_chunks > 0:
            try:
                row = self.db.conn.execute("SELECT sum(cnt) FROM temp.mdrecall_vocab").fetchone()
                if row and row[0]:
                    value = max(1.0, float(row[0]) / total_chunks)
            except apsw.Error:
                pass
        self._avgdl = (version, value)
        return value

    def evidence(self, stats: QueryStats, text: str, ref_length: float) -> KeywordEvidence:
        """Keyword evidence of one chunk (its indexed text: heading trail and body)."""
        if stats.empty or stats.total_idf <= 0:
            return KeywordEvidence(known=0.0)
        lines = text.split("\n")
        line_tokens = [self.tokens(line) for line in lines]
        counts: dict[str, int] = {}
        length = 0
        for toks in line_tokens:
            length += len(toks)
            for t in toks:
                counts[t] = counts.get(t, 0) + 1
        flat = text.replace(" ", "") if any(stats.cjk) else ""
        norm = K1 * (1 - B + B * length / max(1, ref_length))
        matched: list[int] = []
        sat_sum = 0.0
        for i, (form, is_cjk) in enumerate(zip(stats.forms, stats.cjk)):
            if is_cjk:
                tf = flat.count(form[0])
            else:
                tf = min(counts.get(s, 0) for s in form)
            if tf <= 0:
                continue
            matched.append(i)
            sat_sum += stats.idf[i] * tf * (K1 + 1) / (tf + norm)
        matched_idf = sum(stats.idf[i] for i in matched)
        per_line: list[tuple[int, ...]] = []
        for line, toks in zip(lines, line_tokens):
            present = set(toks)
            flat_line = line.replace(" ", "") if any(stats.cjk) else ""
            per_line.append(tuple(
                i for i in matched
                if (flat_line.count(stats.forms[i][0]) if stats.cjk[i] else all(s in present for s in stats.forms[i]))
            ))
        return KeywordEvidence(
            coverage=matched_idf / stats.total_idf,
            bm25=sat_sum / ((K1 + 1) * stats.total_idf),
            mass=matched_idf / stats.max_idf,
            matched=tuple(matched),
            line_terms=per_line,
            known=stats.known,
        )


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


def fts_texts(db: IndexDB, rowids: Iterable[int]) -> dict[int, str]:
    """The indexed text (heading trail + body, CJK spaced) of each chunk, by rowid."""
    ids = list(rowids)
    out: dict[int, str] = {}
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        try:
            out.update(db.conn.execute(f"SELECT rowid, text FROM chunks_fts WHERE rowid IN ({marks})", batch).fetchall())
        except apsw.Error:
            out.update(db.conn.execute(f"SELECT rowid, text FROM chunks WHERE rowid IN ({marks})", batch).fetchall())
    return out


def cosines(db: IndexDB, query_vec: np.ndarray, rowids: Sequence[int]) -> dict[int, float]:
    """Cosine of the query with each chunk's stored vector (chunks without one are left out)."""
    if not len(rowids):
        return {}
    q = np.asarray(query_vec, dtype=np.float32)
    q = q / (float(np.linalg.norm(q)) or 1.0)
    out: dict[int, float] = {}
    ids = list(rowids)
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        for rowid, blob in db.conn.execute(
            f"SELECT rowid, embedding FROM chunks WHERE rowid IN ({marks}) AND embedding IS NOT NULL", batch
        ):
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape[0] != q.shape[0]:
                continue
            norm = float(np.linalg.norm(vec)) or 1.0
            out[int(rowid)] = float(np.dot(vec, q)) / norm
    return out


class Centroids:
    """The mean of every stored (unit) vector, per index version: ``query · centroid`` is the query's
    mean cosine to the whole memory, a corpus statistic saying how much the memory is about the
    query's subject at all (an off-topic question sits far from all of it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: object = None
        self._value: np.ndarray | None = None

    def mean_cosine(self, db: IndexDB, query_vec: np.ndarray, matrix: np.ndarray | None = None) -> float | None:
        key = (id(db), db.chunks_version(), db.chunk_count(), None if matrix is None else matrix.shape)
        with self._lock:
            if key != self._key:
                self._value = self._compute(db, matrix)
                self._key = key
            centroid = self._value
        if centroid is None or centroid.shape[0] != query_vec.shape[0]:
            return None
        q = np.asarray(query_vec, dtype=np.float32)
        return float(np.dot(centroid, q / (float(np.linalg.norm(q)) or 1.0)))

    @staticmethod
    def _compute(db: IndexDB, matrix: np.ndarray | None) -> np.ndarray | None:
        if matrix is not None and matrix.ndim == 2 and matrix.shape[0]:
            return matrix.mean(axis=0)
        total: np.ndarray | None = None
        count = 0
        for (blob,) in db.conn.execute("SELECT embedding FROM chunks WHERE embedding IS NOT NULL"):
            vec = np.frombuffer(blob, dtype=np.float32)
            if total is None:
                total = np.zeros(vec.shape[0], dtype=np.float64)
            if vec.shape[0] != total.shape[0]:
                continue
            total += vec / (float(np.linalg.norm(vec)) or 1.0)
            count += 1
        return None if total is None or not count else (total / count).astype(np.float32)
