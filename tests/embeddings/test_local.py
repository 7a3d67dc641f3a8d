"""The local provider: the bundled all-MiniLM-L6-v2 on the CPU."""

from __future__ import annotations

import numpy as np


def test_query_fast_path_matches_encode(local_provider) -> None:  # type: ignore[no-untyped-def]
    """``embed_query`` skips ``SentenceTransformer.encode``'s bookkeeping; the vector must not change."""
    texts = ["what did we decide about the launch?", "王磊喜欢绿茶", "x", "word " * 400]  # the last one is truncated
    for text in texts:
        fast = np.array(local_provider.embed_query(text))
        reference = np.array(local_provider.embed_documents([text])[0])
        assert fast.shape == (384,)
        assert np.isclose(np.linalg.norm(fast), 1.0, atol=1e-5)
        assert np.allclose(fast, reference, atol=1e-5)


def test_documents_are_normalised_and_distinct(local_provider) -> None:  # type: ignore[no-untyped-def]
    vectors = np.array(local_provider.embed_documents(["the cat sleeps", "quarterly tax filing", "the cat naps"]))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[2] > vectors[0] @ vectors[1]
