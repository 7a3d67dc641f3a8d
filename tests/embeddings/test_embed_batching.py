"""Batch planning (items and tokens), concurrency, progress and failure handling."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from provider_servers import FakeClock, Fault, MistralServer, OpenAIServer, hashed_vector

from mdrecall.config import parse_config
from mdrecall.embeddings.batching import embed_in_batches, plan_batches
from mdrecall.embeddings.registry import create_provider
from mdrecall.errors import EmbeddingError


def test_plan_batches_respects_items_and_tokens() -> None:
    texts = [f"t{i}" for i in range(10)]
    assert plan_batches(texts, [1] * 10, 4, None) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert plan_batches(texts, [3] * 10, 100, 7) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    # An oversized text goes alone; order is kept; nothing is dropped or repeated.
    counts = [2, 50, 2, 2, 2, 2, 2, 2, 2, 2]
    batches = plan_batches(texts, counts, 3, 10)
    assert batches == [[0], [1], [2, 3, 4], [5, 6, 7], [8, 9]]
    assert [i for b in batches for i in b] == list(range(10))
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or sum(counts[i] for i in batch) <= 10
    assert plan_batches([], [], 5, 5) == []
    with pytest.raises(ValueError):
        plan_batches(["a"], [], 5, None)


def _mistral(server: MistralServer, **section):
    cfg = parse_config({"provider": "mistral", "providers": {"mistral": {"baseUrl": server.base_url, "apiKey": server.api_key, **section}}})
    return create_provider("mistral", cfg)


def test_item_capped_provider_gets_no_oversized_request(clock: FakeClock) -> None:
    # A provider that refuses more than 16 inputs per request (spec 5.2: reference batches by bytes only).
    with MistralServer(max_inputs=16) as server:
        provider = _mistral(server, maxItemsPerRequest=16)
        texts = [f"note {i} about topic {i % 7}" for i in range(100)]
        seen: list[tuple[int, int]] = []
        vectors = embed_in_batches(provider, texts, concurrency=3, progress=lambda d, t: seen.append((d, t)))
        assert server.violations == []
        sizes = [len(r.json()["input"]) for r in server.embed_requests()]
        assert max(sizes) == 16 and sum(sizes) == 100 and len(sizes) == 7
        # Every vector belongs to its own text, whatever order the batches finished in.
        expected = np.array([hashed_vector(t, 1024) for t in texts])
        expected /= np.linalg.norm(expected, axis=1)[:, None]
        assert np.allclose(np.array(vectors), expected)
        assert seen[-1] == (100, 100)
        assert [d for d, _ in seen] == sorted(d for d, _ in seen)
        assert clock.sleeps == []


def test_without_the_item_cap_the_server_refuses(clock: FakeClock) -> None:
    with MistralServer(max_inputs=16) as server:
        provider = _mistral(server)  # default cap 128 is above this server's 16
        with pytest.raises(EmbeddingError, match="Too many inputs"):
            embed_in_batches(provider, [f"t{i}" for i in range(40)])


def test_token_budget_splits_requests(clock: FakeClock) -> None:
    with MistralServer() as server:
        provider = _mistral(server, maxTokensPerRequest=100)
        texts = ["word " * 60, "word " * 60, "short", "word " * 30]  # ~75, 75, 2, 38 estimated tokens
        embed_in_batches(provider, texts, concurrency=1)
        assert [len(r.json()["input"]) for r in server.embed_requests()] == [1, 2, 1]


def test_concurrency_runs_batches_in_parallel(clock: FakeClock) -> None:
    with MistralServer() as server:
        provider = _mistral(server, maxItemsPerRequest=5)
        active, peak = 0, 0
        lock = threading.Lock()
        original = provider.embed_documents

        def tracking(texts):
            nonlocal active, peak
            with lock:
                active += 1
                peak = max(peak, active)
            try:
                threading.Event().wait(0.05)
                return original(texts)
            finally:
                with lock:
                    active -= 1

        provider.embed_documents = tracking  # type: ignore[method-assign]
        embed_in_batches(provider, [f"t{i}" for i in range(40)], concurrency=4)
        assert 2 <= peak <= 4


def test_failed_batch_stops_the_rest_and_reports_finished_ones(clock: FakeClock) -> None:
    with MistralServer() as server:
        provider = _mistral(server, maxItemsPerRequest=10, maxRetries=0)
        finished: list[list[int]] = []
        texts = [f"t{i}" for i in range(50)]
        # Third request fails for good (400 is not retried).
        calls = {"n": 0}
        original = provider.embed_documents

        def third_fails(batch):
            calls["n"] += 1
            if calls["n"] == 3:
                server.queue(Fault(400, {"object": "error", "message": "bad input", "type": "invalid_request_error"}))
            return original(batch)

        provider.embed_documents = third_fails  # type: ignore[method-assign]
        with pytest.raises(EmbeddingError, match="bad input"):
            embed_in_batches(provider, texts, concurrency=1, on_batch=lambda idx, vec: finished.append(idx))
        assert finished == [list(range(0, 10)), list(range(10, 20))]
        assert len(server.embed_requests()) == 3  # batches 4 and 5 never started


def test_openai_default_limits_allow_big_requests(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        cfg = parse_config({"provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": server.api_key}})
        provider = create_provider("openai", cfg)
        assert provider.max_batch_items == 2048 and provider.max_batch_tokens == 300_000
        embed_in_batches(provider, [f"t{i}" for i in range(300)])
        assert [len(r.json()["input"]) for r in server.embed_requests()] == [300]


def test_overlong_input_is_cut_to_the_input_limit(clock: FakeClock) -> None:
    with MistralServer() as server:
        provider = _mistral(server, maxInputTokens=50)
        provider.embed_documents(["word " * 500])
        sent = server.embed_requests()[0].json()["input"][0]
        assert len(sent) < 50 * 4 and sent.startswith("word word")
