"""The local provider: the bundled all-MiniLM-L6-v2 on the CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def test_query_fast_path_matches_encode(local_provider) -> None:  # type: ignore[no-untyped-def]
    """A query and the same text embedded as a document give the same vector."""
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


def test_the_bundled_model_never_needs_torch() -> None:
    """Selecting the bundled model, embedding a query and a batch of documents, and counting tokens
    run in NumPy: torch and sentence-transformers (~9 s, ~600 MiB, a separate extra) are never imported."""
    import subprocess
    import sys

    code = (
        "import sys; from mdrecall.embeddings.local import LocalEmbeddingProvider as P; p = P();"
        "v = p.embed_query('which database do we use?'); n = p.count_tokens('hello world');"
        "d = p.embed_documents(['note %d about the launch' % i for i in range(40)]);"
        "print(len(v), n, len(d), p.runs_on, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    assert out.split("\n")[0] == "384 4 40 numpy False False"


def test_batches_match_single_texts_on_any_worker_count(local_provider) -> None:  # type: ignore[no-untyped-def]
    """Documents are spread over worker threads longest first; each vector must land at its text's
    position and equal the one-text result, whatever the worker count."""
    from mdrecall.embeddings.bert_numpy import load_encoder
    from mdrecall.embeddings.local import _default_model_path

    encoder = load_encoder(Path(_default_model_path()))
    assert encoder is not None
    texts = [f"note {i}: " + "the deploy moved to Thursday " * (i % 7 + 1) for i in range(13)] + ["x"]
    single = np.array([encoder.encode(t) for t in texts])
    for workers in (1, 2, 3):
        assert np.array_equal(encoder.encode_many(texts, workers=workers), single)
    assert np.array_equal(np.array(local_provider.embed_documents(texts)), single)
    assert encoder.encode_many([]).shape == (0, 384)


def test_numpy_documents_match_torch_documents(local_provider) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers")  # the torch extra: the reference implementation
    from mdrecall.embeddings.bert_numpy import load_encoder
    from mdrecall.embeddings.local import _default_model_path

    encoder = load_encoder(Path(_default_model_path()))
    assert encoder is not None
    texts = ["# 2026-11-05\n- Drop Safari 15 support.\n- Jonas wants a group-by-aisle option.", "王磊喜欢绿茶，不喝咖啡。" * 20]
    torch_vectors = np.array(local_provider._encode(texts))  # sentence-transformers on torch
    numpy_vectors = np.array(local_provider.embed_documents(texts))
    assert local_provider.runs_on == "numpy"
    assert np.allclose(torch_vectors, numpy_vectors, atol=1e-5)
    assert np.allclose(numpy_vectors, np.array([encoder.encode(t) for t in texts]), atol=1e-6)


def test_token_counts_match_the_model_tokenizer(local_provider) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers")
    texts = ["hello world", "王磊喜欢绿茶，不喝咖啡。", "word " * 300, "", "e-mail: a@b.c — naïve café"]
    hf = [len(ids) for ids in local_provider._model.tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]]
    assert local_provider.count_tokens_many(texts) == hf
    assert local_provider.max_input_tokens == local_provider._model.max_seq_length == 256
