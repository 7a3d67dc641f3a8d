"""Keyword search over QMD's BM25 without its AND semantics, and the score mdrecall reports.

QMD's lex search ANDs every word (``"what"* AND "database"* AND ...``), so a natural question
usually matches nothing. QMD has no OR operator, so mdrecall asks several lex sub-queries through
the warm process (pipelined, one round trip) and merges them:

* one with all the question's keywords (stop words dropped, ``text.query_terms``): documents that
  hold every keyword, found even when each keyword alone is common;
* one per keyword (at most ``qmd.maxTerms``): documents that hold some of them.

Score: the builtin engine's calibrated keyword score (search/relevance.py), so that one cut-off
rule holds across backends (keyword-only searches cut at ``query.keywordOnlyMinScore`` while
``minScore`` is left as configured). Its evidence is what QMD's answers tell: each keyword weighted
by its BM25 IDF over QMD's document count, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` with ``df``
the number of documents its sub-query returned (QMD returns at most 20 per collection, so very
common words all weigh alike); ``coverage``, the share of that weight a document holds (a document
in the all-keywords answer holds every keyword); ``mass``, the held weight in units of the rarest
possible term's; ``known``, the share of weight some document holds. Term frequencies and lengths
are not in QMD's answer: BM25's saturation is taken at one occurrence (``bm25 = coverage``). QMD's
BM25 order breaks ties between equal scores (rank 0: QMD's best for that sub-query). Documents are
whole files where the calibration was fitted on ~200-token chunks: scores are estimates, documented
as such in docs/qmd.md.

QMD returns one hit per document with a short snippet around its best lines; of the snippets the
sub-queries returned for one document, the one holding the most keyword weight is kept.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mdrecall.search.relevance import SCALE, KeywordEvidence, keyword_logit
from mdrecall.text import CJK_CHAR, query_terms, term_stems, word_tokens

_NUMBERED = re.compile(r"^\d+: ?")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, slots=True)
class QmdHit:
    """One item of a QMD ``query`` answer, its snippet parsed."""

    collection: str
    rel: str  # path inside the collection, as QMD stores it (literal, not "handelized")
    docid: str  # first 6 hex digits of the sha256 of the file's text when QMD indexed it
    start_line: int
    end_line: int
    text: str  # the snippet's lines, without QMD's line numbers and hunk header
    qmd_score: float
    rank: int


def parse_snippet(snippet: str, line: int | None) -> tuple[int, int, str]:
    """(first line, last line, text) of a QMD snippet.

    QMD numbers the snippet's lines (``addLineNumbers``) starting at the best line, but counts its
    own ``@@ -start,count @@`` header as the first of them, so those numbers are one too high; the
    header's start is the true first line.
    """
    lines = [_NUMBERED.sub("", raw, count=1) for raw in snippet.split("\n")]
    start = None
    if lines:
        match = _HUNK.match(lines[0])
        if match:
            start = int(match.group(1))
            lines = lines[1:]
    while lines and not lines[-1].strip():
        lines.pop()
    if start is None:
        start = max(1, int(line or 1))
    end = start + max(len(lines), 1) - 1
    return start, end, "\n".join(lines)


def parse_hits(structured: dict[str, Any]) -> list[QmdHit]:
    hits = []
    for rank, item in enumerate(structured.get("results") or []):
        file = str(item.get("file") or "")
        if file.startswith("qmd://"):
            file = file[len("qmd://"):]
        collection, _, rel = file.partition("/")
        if not collection or not rel:
            continue
        start, end, text = parse_snippet(str(item.get("snippet") or ""), item.get("line"))
        docid = str(item.get("docid") or "").lstrip("#")
        hits.append(QmdHit(collection, rel, docid, start, end, text, float(item.get("score") or 0.0), rank))
    return hits


# -- planning ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeywordPlan:
    terms: list[str]
    lex: list[str]  # the lex sub-queries, the all-keywords one first


def plan_keywords(query: str, match: str = "or", max_terms: int = 8) -> KeywordPlan:
    """The lex sub-queries for ``query``. ``match="and"``: QMD's own semantics (the question as is)."""
    if match == "and":
        text = " ".join(query.replace("\n", " ").split())
        if text.count('"') % 2:
            text = text.replace('"', " ")
        return KeywordPlan(query_terms(query), [text] if text.strip() else [])
    terms = query_terms(query)[:max_terms]
    if not terms:
        return KeywordPlan([], [])
    lex = [" ".join(terms)]
    if len(terms) > 1:
        lex.extend(terms)
    return KeywordPlan(terms, lex)


# -- merging ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Ranked:
    hit: QmdHit
    score: float
    coverage: float
    matched: list[str] = field(default_factory=list)
    #: keyword -> IDF weight, for placing the cited lines (:func:`best_window`); empty: keep QMD's
    weights: dict[str, float] = field(default_factory=dict)
    #: QMD's own rank for the document (breaks ties between equal scores).
    qmd_rank: int = 0


def idf(df: int, total: int) -> float:
    total = max(total, df, 1)
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


def _holds(text: str, term: str, stem: str) -> bool:
    if CJK_CHAR.match(term):
        return term in text
    return any(token.startswith(stem) for token in word_tokens(text))


def merge_keyword(plan: KeywordPlan, answers: Sequence[list[QmdHit]], total_docs: int, match: str = "or") -> list[Ranked]:
    """Merge the sub-queries' answers (same order as ``plan.lex``) into scored documents, best first."""
    if not answers:
        return []
    if match == "and" or len(plan.lex) == 1:
        # One sub-query: every hit holds every keyword; QMD's order is the ranking.
        weights = {t: idf(len(answers[0]), total_docs) for t in plan.terms}
        held = calibrated(1.0, sum(weights.values()), total_docs, 1.0 if answers[0] else 0.0)
        return [Ranked(h, held, 1.0, list(plan.terms), weights) for h in answers[0]]
    everything, per_term = answers[0], answers[1:]
    weights = {t: idf(len(hits), total_docs) for t, hits in zip(plan.terms, per_term)}
    total_weight = sum(weights.values()) or 1.0
    known = sum(weights[t] for t, hits in zip(plan.terms, per_term) if hits) / total_weight
    stems = dict(zip(plan.terms, term_stems(plan.terms)))
    docs: dict[tuple[str, str], dict[str, Any]] = {}

    def entry(hit: QmdHit) -> dict[str, Any]:
        return docs.setdefault((hit.collection, hit.rel), {"matched": set(), "hits": [], "rank": None})

    for hit in everything:
        e = entry(hit)
        e["matched"].update(plan.terms)
        e["hits"].append(hit)
        e["rank"] = hit.rank
    for term, hits in zip(plan.terms, per_term):
        for hit in hits:
            e = entry(hit)
            e["matched"].add(term)
            e["hits"].append(hit)
    ranked: list[Ranked] = []
    for e in docs.values():
        matched = [t for t in plan.terms if t in e["matched"]]
        coverage = sum(weights[t] for t in matched) / total_weight
        # QMD's rank in the all-keywords answer, else its best rank in a matched keyword's answer.
        rank = e["rank"] if e["rank"] is not None else min(h.rank for h in e["hits"])
        # The snippet holding the most keyword weight; the first of equals (the all-keywords one).
        best, best_held = e["hits"][0], -1.0
        for hit in e["hits"]:
            low = hit.text.lower()
            held = sum(weights[t] for t in matched if _holds(low, t, stems[t]))
            if held > best_held:
                best, best_held = hit, held
        score = calibrated(coverage, sum(weights[t] for t in matched), total_docs, known)
        ranked.append(Ranked(best, score, coverage, matched, weights, rank))
    ranked.sort(key=lambda r: (-r.score, r.qmd_rank))
    return ranked


def calibrated(coverage: float, held: float, total_docs: int, known: float) -> float:
    """The builtin's calibrated keyword score for evidence QMD's answers give (module docstring)."""
    evidence = KeywordEvidence(coverage=coverage, bm25=coverage, mass=held / idf(0, total_docs), known=known)
    return round(SCALE.score(keyword_logit(evidence)), 6)


def merge_ranked(answer: list[QmdHit]) -> list[Ranked]:
    """vsearch / query answers: QMD's own score (the reranker blend for query; 1/rank for vsearch)."""
    return [Ranked(h, max(0.0, min(1.0, h.qmd_score)), 1.0) for h in answer]


def best_window(lines: Sequence[str], weights: dict[str, float], size: int = 4) -> tuple[int, int, float] | None:
    """The ``size`` consecutive lines holding the most keyword weight: (first, last, weight), 1-based.

    QMD picks one snippet per document around its own best line for one sub-query; a long note
    (a day of conversation) often holds the answer elsewhere. Blank lines at either end are dropped.
    """
    if not lines or not weights:
        return None
    stems = dict(zip(weights, term_stems(list(weights))))
    per_line = [sum(w for t, w in weights.items() if _holds(line.lower(), t, stems[t])) for line in lines]
    best_start, best_sum = 0, 0.0
    for start in range(0, max(1, len(lines) - size + 1)):
        total = sum(per_line[start : start + size])
        if total > best_sum + 1e-12:  # the first of equals
            best_start, best_sum = start, total
    if best_sum <= 0:
        return None
    first, last = best_start, min(len(lines), best_start + size) - 1
    while first < last and not lines[first].strip():
        first += 1
    while last > first and not lines[last].strip():
        last -= 1
    return first + 1, last + 1, best_sum
