"""``openai`` through the official SDK against a local server speaking OpenAI's wire format."""

from __future__ import annotations

import numpy as np
import pytest
from provider_servers import FakeClock, Fault, OpenAIServer, hashed_vector, openai_error

from mdrecall.config import parse_config
from mdrecall.embeddings.registry import create_provider
from mdrecall.errors import EmbeddingError


def _provider(server: OpenAIServer, **remote):
    cfg = parse_config({"provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": server.api_key, **remote}})
    return create_provider("openai", cfg)


def test_documents_request_and_response(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        provider = _provider(server)
        vectors = provider.embed_documents(["first note", "second note"])
        (req,) = server.requests
        assert (req.method, req.path) == ("POST", "/v1/embeddings")
        assert req.headers["authorization"] == "Bearer sk-test-openai"
        assert req.headers["content-type"] == "application/json"
        assert req.json() == {"model": "text-embedding-3-small", "input": ["first note", "second note"], "encoding_format": "float"}
        assert len(vectors) == 2 and len(vectors[0]) == 1536 == provider.dims
        expected = np.array(hashed_vector("second note", 1536))
        assert np.allclose(vectors[1], expected / np.linalg.norm(expected))
        assert np.isclose(np.linalg.norm(vectors[0]), 1.0)
        assert server.violations == []


def test_query_and_dimensions(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        provider = _provider(server, dimensions=256)
        assert provider.dims == 256
        vector = provider.embed_query("what did we decide")
        assert len(vector) == 256
        assert server.requests[0].json() == {
            "model": "text-embedding-3-small", "input": ["what did we decide"], "encoding_format": "float", "dimensions": 256,
        }
        assert provider.identity["dimensions"] == 256


def test_out_of_order_data_is_mapped_by_index(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        a, b = hashed_vector("alpha", 1536), hashed_vector("beta", 1536)
        body = {"object": "list", "model": "text-embedding-3-small", "usage": {"prompt_tokens": 2, "total_tokens": 2},
                "data": [{"object": "embedding", "index": 1, "embedding": b}, {"object": "embedding", "index": 0, "embedding": a}]}
        server.queue(Fault(200, body))
        vectors = _provider(server).embed_documents(["alpha", "beta"])
        assert np.allclose(vectors[0], np.array(a) / np.linalg.norm(a))
        assert np.allclose(vectors[1], np.array(b) / np.linalg.norm(b))


def test_dimension_mismatch_is_refused(clock: FakeClock) -> None:
    # A gateway that serves another model under the same name returns 512-d vectors.
    with OpenAIServer(models={"text-embedding-3-small": 512}) as server:
        with pytest.raises(EmbeddingError, match="512-dimensional vectors, expected 1536"):
            _provider(server).embed_documents(["x"])


def test_error_body_is_surfaced(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        provider = create_provider("openai", parse_config({
            "provider": "openai", "model": "text-embedding-4-imaginary",
            "remote": {"baseUrl": server.base_url, "apiKey": server.api_key}}))
        with pytest.raises(EmbeddingError) as info:
            provider.embed_query("x")
        assert info.value.status == 404 and not info.value.retryable
        assert "The model `text-embedding-4-imaginary` does not exist" in str(info.value)


def test_bad_key_is_reported_without_the_key(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        provider = create_provider("openai", parse_config({
            "provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": "sk-wrong-123"}}))
        with pytest.raises(EmbeddingError) as info:
            provider.embed_query("x")
        assert info.value.status == 401 and "Incorrect API key" in str(info.value)
        assert "sk-wrong-123" not in str(info.value)


def test_sdk_retries_are_off_so_waits_are_ours(clock: FakeClock) -> None:
    with OpenAIServer() as server:
        server.queue(Fault(503, openai_error("overloaded", "server_error")))
        _provider(server).embed_query("x")
        assert len(server.requests) == 2 and len(clock.sleeps) == 1
        assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "0"]
