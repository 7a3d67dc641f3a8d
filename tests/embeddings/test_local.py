"""The local provider: the bundled all-MiniLM-L6-v2 on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
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

    import importlib.util

    code = (
        "import sys; from mdrecall.embeddings.local import LocalEmbeddingProvider as P; p = P();"
        "v = p.embed_query('which database do we use?'); n = p.count_tokens('hello world');"
        "d = p.embed_documents(['note %d about the launch' % i for i in range(40)]);"
        "print(len(v), n, len(d), p.runs_on, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    runtime = "onnxruntime" if importlib.util.find_spec("onnxruntime") else "numpy"
    assert out.split("\n")[0] == f"384 4 40 {runtime} False False"


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
    # the provider runs onnxruntime where installed: the same vectors within 1e-5 (tests/embeddings/test_onnx_encoder.py)
    assert np.abs(np.array(local_provider.embed_documents(texts)) - single).max() < 1e-5
    assert encoder.encode_many([]).shape == (0, 384)


def test_numpy_documents_match_torch_documents(local_provider) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers")  # the torch extra: the reference implementation
    from mdrecall.embeddings.bert_numpy import load_encoder
    from mdrecall.embeddings.local import _default_model_path

    encoder = load_encoder(Path(_default_model_path()))
    assert encoder is not None
    texts = ["# 2026-11-05\n- Drop Safari 15 support.\n- Jonas wants a group-by-aisle option.", "王磊喜欢绿茶，不喝咖啡。" * 20]
    torch_vectors = np.array(local_provider._encode(texts))  # sentence-transformers on torch
    numpy_vectors = encoder.encode_many(texts)
    assert np.allclose(torch_vectors, numpy_vectors, atol=1e-5)
    assert np.allclose(numpy_vectors, np.array([encoder.encode(t) for t in texts]), atol=1e-6)
    # whatever runs the provider (onnxruntime where installed) gives the same vectors
    assert np.allclose(np.array(local_provider.embed_documents(texts)), numpy_vectors, atol=1e-5)


_WITHOUT_ONNXRUNTIME = "import sys; sys.modules['onnxruntime'] = None  # as if not installed\n"


def test_without_onnxruntime_the_model_runs_in_numpy_and_status_says_so(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# Notes\n- The launch moved to Thursday.\n", encoding="utf-8")
    code = _WITHOUT_ONNXRUNTIME + (
        "import json\nfrom mdrecall import open_manager\n"
        f"m = open_manager({str(tmp_path)!r}, {{'provider': 'local', 'sync': {{'watch': False}}}}, use_global_config=False)\n"
        "m.sync(); hits = m.search('when is the launch?').results; s = m.status(); m.close()\n"
        "print(json.dumps({'hits': len(hits), 'mode': s.search_mode, 'reasons': s.mode_reasons,"
        " 'runtime': s.details['embeddingRuntime']}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["hits"] >= 1 and result["mode"] == "hybrid"
    assert result["runtime"]["runsOn"] == "numpy"
    assert "onnxruntime is not installed" in result["runtime"]["note"]
    assert any("onnxruntime is not installed" in r and "pip install" in r for r in result["reasons"])


def test_asking_for_onnxruntime_without_it_fails_clearly() -> None:
    code = _WITHOUT_ONNXRUNTIME + (
        "from mdrecall.embeddings.local import LocalEmbeddingProvider\nfrom mdrecall.errors import ProviderUnavailableError\n"
        "try:\n    LocalEmbeddingProvider(runtime='onnxruntime')\nexcept ProviderUnavailableError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    assert "local.runtime is onnxruntime but it is not installed" in out and "pip install" in out


def test_token_counts_match_the_model_tokenizer(local_provider) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers")
    texts = ["hello world", "王磊喜欢绿茶，不喝咖啡。", "word " * 300, "", "e-mail: a@b.c — naïve café"]
    hf = [len(ids) for ids in local_provider._model.tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]]
    assert local_provider.count_tokens_many(texts) == hf
    assert local_provider.max_input_tokens == local_provider._model.max_seq_length == 256


def test_providers_of_one_process_share_the_loaded_model() -> None:
    """`mdrecall watch` holds two managers (its own and the warm path's): the second provider reuses
    the first one's encoder instead of loading the model again, and nothing is kept once no provider
    holds it."""
    import gc

    from mdrecall.embeddings import local

    first = local.LocalEmbeddingProvider()
    second = local.LocalEmbeddingProvider()
    assert first._encoder is not None and first._encoder is second._encoder
    numpy = local.LocalEmbeddingProvider(runtime="numpy")  # another runtime: another encoder
    assert numpy._encoder is not first._encoder and numpy._encoder.runtime == "numpy"
    assert np.allclose(first.embed_query("where is the database hosted?"), numpy.embed_query("where is the database hosted?"), atol=1e-5)
    # Released with the last provider holding it (the session's `local_provider` may hold the default one).
    key = next(k for k, loaded in local._LOADED.items() if loaded.encoder is numpy._encoder)
    del first, second, numpy
    gc.collect()
    assert key not in local._LOADED
