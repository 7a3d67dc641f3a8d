"""Maximal marginal relevance: trade a little relevance for less repetition among the results.

Greedy: pick the candidate maximising ``λ·relevance − (1−λ)·max Jaccard(candidate, picked)``, with
relevance min-max normalised over the candidates and Jaccard over word tokens plus CJK unigrams and
adjacent bigrams (``text.similarity_tokens``).

Cost: the pipeline reranks only the head of the ranking (``query.mmr.candidates``, 40 by default),
each candidate's highest similarity to the picked set is updated against the newest pick only
(O(n·k), not O(n·k²)), and token sets are cached per chunk across searches. It was a greedy scan of
every fused candidate with fresh token sets, 30–50× a plain search.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from mdrecall.search.lru import IdleLru
from mdrecall.text import similarity_tokens

T = TypeVar("T")

_CACHE_SIZE = 4096
_tokens_cache: IdleLru[tuple[Hashable, int], frozenset[str]] = IdleLru(_CACHE_SIZE)


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def _tokens(text: str, key: Hashable | None) -> frozenset[str]:
    if key is None:
        return frozenset(similarity_tokens(text))
    cache_key = (key, hash(text))
    found = _tokens_cache.get(cache_key)
    if found is None:
        found = frozenset(similarity_tokens(text))
        _tokens_cache.put(cache_key, found)
    return found


def mmr_rerank(
    items: Sequence[T],
    score: Callable[[T], float],
    text: Callable[[T], str],
    lam: float,
    key: Callable[[T], Hashable] | None = None,
    normalise: bool = True,
) -> list[T]:
    """``key``: a stable id per item (e.g. the chunk's rowid) under which its token set is cached;
    ``normalise``: min-max the scores first (off for calibrated scores, already on one scale)."""
    if len(items) <= 1 or lam >= 1.0:
        return list(items)
    scores = [score(i) for i in items]
    lo, hi = min(scores), max(scores)
    if normalise:
        rel = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    else:
        rel = scores
    tokens = [_tokens(text(i), key(i) if key else None) for i in items]
    remaining = list(range(len(items)))
    overlap = [0.0] * len(items)  # highest similarity to anything picked so far
    picked: list[int] = []
    while remaining:
        best, best_value = None, float("-inf")
        for idx in remaining:
            value = lam * rel[idx] - (1 - lam) * overlap[idx]
            if value > best_value or (value == best_value and best is not None and scores[idx] > scores[best]):
                best, best_value = idx, value
        assert best is not None
        picked.append(best)
        remaining.remove(best)
        for idx in remaining:
            sim = jaccard(tokens[idx], tokens[best])
            if sim > overlap[idx]:
                overlap[idx] = sim
    return [items[i] for i in picked]
