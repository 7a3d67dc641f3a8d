"""Why a hit scored what it did, on the one scale a user sees: the score.

A hit's score is a documented monotone map of the calibrated probability that it holds what was
asked (search/relevance.py ``ScoreScale``: 0.35, the default ``minScore``, is the edge of
"relevant"). Earlier explanations mixed that score with the probability, logits, a raw FTS5 rank
and a cosine, so ``score 0.528`` sat beside ``probability 0.0655`` and ``keyword 0.000`` beside
"matched deploy". Here every signal is said on the score's own scale, in the order the score is
built, and the last step *is* the hit's score:

* ``keyword``: the score the keyword evidence alone gives (with the query words it matched, those it
  did not, and the share of the query's term weight found: ``coverage``);
* ``meaning``: the score the embedding's similarity alone gives (``similarity``: the cosine);
* ``combined``: both together (hybrid search, when both found the hit);
* ``date`` / ``speaker``: what a date named in the question, or a statement by the other speaker than
  the one asked about, changed (``change``) and the score after it;
* ``supersession``: a newer statement took the score of the one it replaces (``score``), or a
  possible restatement traded places;
* ``decay``: the age multiplier and the score after it.

Raw logits, BM25 figures, the FTS5 rank and the probability itself are only in ``debug``, when
``query.debugScores`` asks for them (``mdrecall search --explain --debug-scores``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mdrecall.search import relevance as rel
from mdrecall.search.budget import Hit

if TYPE_CHECKING:
    from mdrecall.search.pipeline import Gathered


def _score(logit: float) -> float:
    return round(min(1.0, max(0.0, rel.SCALE.score(logit))), 4)


def explain(hit: Hit, found: Gathered, debug: bool = False) -> dict[str, Any]:
    """The signals behind one hit's score, as JSON (docs/retrieval.md, "Explanations")."""
    out: dict[str, Any] = {"score": round(min(1.0, max(0.0, hit.score)), 4), "mode": found.mode}
    stats, ev = found.stats, hit.evidence
    k, v = hit.keyword_logit, hit.vector_logit
    if k is not None and stats is not None and ev is not None:
        matched = set(ev.matched)
        out["keyword"] = {
            "score": _score(k),
            "matched": [stats.terms[i] for i in ev.matched],
            "missing": [t for i, t in enumerate(stats.terms) if i not in matched],
            "coverage": round(ev.coverage, 3),
        }
    if v is not None and hit.cosine is not None:
        out["meaning"] = {"score": _score(v), "similarity": round(hit.cosine, 3)}
    if found.mode == "hybrid":
        base = rel.fused_logit(k, v)
    elif found.mode == "vector-only":
        base = v if v is not None else -12.0
    else:
        base = k if k is not None else -12.0
    if k is not None and v is not None and found.mode == "hybrid":
        out["combined"] = {"score": _score(base)}
    logit = base
    if hit.date_boost:
        before, logit = logit, logit + hit.date_boost
        out["date"] = {"score": _score(logit), "change": round(_score(logit) - _score(before), 4)}
    if hit.other_speaker and found.speaker is not None and hit.speaker_logit:
        before, logit = logit, logit + hit.speaker_logit
        stated_by = hit.stated_by or ("assistant" if found.speaker.wanted == "user" else "user")
        out["speaker"] = {"asked": found.speaker.label(), "statedBy": stated_by, "score": _score(logit),
                          "change": round(_score(logit) - _score(before), 4)}  # fmt: skip
    if hit.supersession:
        moved = dict(hit.supersession)
        if abs(hit.logit - logit) > 1e-9:  # raised with the replaced statement's score, or traded places
            moved["score"] = _score(hit.logit)
        out["supersession"] = moved
    if hit.decay is not None:
        out["decay"] = {"multiplier": round(hit.decay, 4), "score": out["score"]}
    if debug:
        out["debug"] = _debug(hit)
    return out


def _debug(hit: Hit) -> dict[str, Any]:
    """The raw parts: logits, the BM25 figures, the FTS5 rank and the probability behind the score."""
    ev = hit.evidence
    out: dict[str, Any] = {"logit": round(hit.logit, 3), "probability": round(rel.sigmoid(hit.logit), 4)}
    if hit.keyword_logit is not None:
        out["keywordLogit"] = round(hit.keyword_logit, 3)
    if hit.vector_logit is not None:
        out["vectorLogit"] = round(hit.vector_logit, 3)
    if ev is not None:
        out["bm25"] = round(ev.bm25, 4)
        out["mass"] = round(ev.mass, 4)
        out["known"] = round(ev.known, 4)
    if hit.keyword_rank is not None:
        out["keywordRank"] = hit.keyword_rank
    if hit.text_score is not None:
        out["ftsRank"] = round(hit.text_score, 4)
    if hit.date_boost:
        out["dateLogit"] = round(hit.date_boost, 3)
    if hit.speaker_logit:
        out["speakerLogit"] = round(hit.speaker_logit, 3)
    return out


__all__ = ["explain"]
