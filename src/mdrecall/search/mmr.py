"""Maximal marginal relevance: trade a little relevance for less repetition among the results.

Greedy: pick the candidate maximising ``λ·relevance − (1−λ)·max Jaccard(candidate, picked)``, with
relevance min-max normalised over the candidates and Jaccard over word tokens plus CJK unigrams and
adjacent bigrams (``text.similarity_tokens``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from mdrecall.text import similarity_tokens

T = TypeVar("T")


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def mmr_rerank(items: Sequence[T], score: Callable[[T], float], text: Callable[[T], str], lam: float) -> list[T]:
    if len(items) <= 1 or lam >= 1.0:
        return list(items)
    scores = [score(i) for i in items]
    lo, hi = min(scores), max(scores)
    rel = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    tokens = [similarity_tokens(text(i)) for i in items]
    remaining = list(range(len(items)))
    picked: list[int] = []
    while remaining:
        best, best_value = None, float("-inf")
        for idx in remaining:
            overlap = max((jaccard(tokens[idx], tokens[p]) for p in picked), default=0.0)
            value = lam * rel[idx] - (1 - lam) * overlap
            if value > best_value or (value == best_value and best is not None and scores[idx] > scores[best]):
                best, best_value = idx, value
        assert best is not None
        picked.append(best)
        remaining.remove(best)
    return [items[i] for i in picked]
