"""``mistral``: mistral-embed over Mistral's embeddings endpoint."""

from __future__ import annotations

import pytest
from provider_servers import FakeClock, Fault, MistralServer, mistral_error

from mdrecall.config import parse_config
from mdrecall.embeddings.batching import embed_in_batches
from mdrecall.embeddings.registry import create_provider
from mdrecall.errors import EmbeddingError


def _provider(server: MistralServer, **section):
    cfg = parse_config({"provider": "mistral", "providers": {"mistral": {"baseUrl": server.base_url, "apiKey": server.api_key, **section}}})
    return create_provider("mistral", cfg)


def test_request_shape(clock: FakeClock) -> None:
    with MistralServer() as server:
        provider = _provider(server)
        vectors = provider.embed_documents(["une note", "another"])
        (req,) = server.requests
        assert (req.method, req.path) == ("POST", "/v1/embeddings")
        assert req.headers["authorization"] == "Bearer ms-test-key"
        assert req.json() == {"model": "mistral-embed", "input": ["une note", "another"]}
        assert len(vectors[0]) == 1024 == provider.dims
        assert provider.max_batch_items == 128 and provider.max_batch_tokens == 16_000


def test_default_limits_fit_the_real_item_cap(clock: FakeClock) -> None:
    with MistralServer(max_inputs=256) as server:
        embed_in_batches(_provider(server), [f"n{i}" for i in range(300)], concurrency=1)
        assert [len(r.json()["input"]) for r in server.requests] == [128, 128, 44]
        assert server.violations == []


def test_rate_limit_message(clock: FakeClock) -> None:
    with MistralServer() as server:
        server.queue(*[Fault(429, mistral_error("Requests rate limit exceeded", "rate_limited"))] * 3)
        provider = _provider(server, maxRetries=2)
        with pytest.raises(EmbeddingError, match="Requests rate limit exceeded"):
            provider.embed_query("x")
        assert len(clock.sleeps) == 2
