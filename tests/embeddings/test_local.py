"""The local provider: the bundled all-MiniLM-L6-v2 on the CPU."""

from __future__ import annotations

from pathlib import Path

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


def test_searching_needs_no_torch() -> None:
    """Selecting the bundled model, embedding a query or a few documents must not import torch or
    sentence-transformers (9 s here); a larger batch of documents loads them."""
    import subprocess
    import sys

    code = (
        "import sys; from mdrecall.embeddings.local import LocalEmbeddingProvider as P; p = P();"
        "v = p.embed_query('which database do we use?'); n = p.count_tokens('hello world');"
        "d = p.embed_documents(['a note', 'another note']);"
        "print(len(v), n, len(d), 'torch' in sys.modules, 'sentence_transformers' in sys.modules);"
        "p.embed_documents(['note %d' % i for i in range(9)]); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout.split("\n")
    assert out[0] == "384 4 2 False False" and out[1] == "True"


def test_numpy_documents_match_torch_documents(local_provider) -> None:  # type: ignore[no-untyped-def]
    from mdrecall.embeddings.bert_numpy import load_encoder
    from mdrecall.embeddings.local import _default_model_path

    encoder = load_encoder(Path(_default_model_path()))
    assert encoder is not None
    texts = ["# 2026-11-05\n- Drop Safari 15 support.\n- Jonas wants a group-by-aisle option.", "王磊喜欢绿茶，不喝咖啡。" * 20]
    torch_vectors = np.array(local_provider._encode(texts))
    numpy_vectors = np.array([encoder.encode(t) for t in texts])
    assert np.allclose(torch_vectors, numpy_vectors, atol=1e-5)


def test_token_counts_match_the_model_tokenizer(local_provider) -> None:  # type: ignore[no-untyped-def]
    texts = ["hello world", "王磊喜欢绿茶，不喝咖啡。", "word " * 300, "", "e-mail: a@b.c — naïve café"]
    hf = [len(ids) for ids in local_provider._model.tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]]
    assert local_provider.count_tokens_many(texts) == hf
    assert local_provider.max_input_tokens == local_provider._model.max_seq_length == 256
