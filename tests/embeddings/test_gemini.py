"""``gemini``: batchEmbedContents / embedContent, task types, header auth, output dimensionality."""

from __future__ import annotations

import numpy as np
import pytest
from provider_servers import FakeClock, GeminiServer

from mdrecall.config import parse_config
from mdrecall.embeddings.batching import embed_in_batches
from mdrecall.embeddings.registry import create_provider
from mdrecall.errors import EmbeddingError


def _provider(server: GeminiServer, **section):
    cfg = parse_config({"provider": "gemini", "providers": {"gemini": {"baseUrl": server.base_url, "apiKey": server.api_key, **section}}})
    return create_provider("gemini", cfg)


def test_documents_use_batch_embed_contents_with_document_task(clock: FakeClock) -> None:
    with GeminiServer() as server:
        vectors = _provider(server).embed_documents(["one", "two"])
        (req,) = server.requests
        assert req.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
        assert req.headers["x-goog-api-key"] == "gm-test-key" and "key=" not in req.query
        assert "authorization" not in req.headers
        assert req.json() == {"requests": [
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "one"}]}, "taskType": "RETRIEVAL_DOCUMENT"},
            {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "two"}]}, "taskType": "RETRIEVAL_DOCUMENT"},
        ]}
        assert len(vectors) == 2 and len(vectors[0]) == 3072
        assert server.violations == []


def test_query_uses_embed_content_with_query_task(clock: FakeClock) -> None:
    with GeminiServer() as server:
        vector = _provider(server).embed_query("where is the key")
        (req,) = server.requests
        assert req.path == "/v1beta/models/gemini-embedding-001:embedContent"
        assert req.json() == {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "where is the key"}]},
                              "taskType": "RETRIEVAL_QUERY"}
        assert len(vector) == 3072


def test_output_dimensionality_and_normalisation(clock: FakeClock) -> None:
    with GeminiServer() as server:
        provider = _provider(server, dimensions=768)
        vector = provider.embed_query("short vectors")
        assert server.requests[0].json()["outputDimensionality"] == 768
        assert len(vector) == 768 and provider.dims == 768
        assert np.isclose(np.linalg.norm(vector), 1.0)  # Gemini does not normalise below 3072


def test_batches_stay_within_100_requests(clock: FakeClock) -> None:
    with GeminiServer(max_requests=100) as server:
        vectors = embed_in_batches(_provider(server), [f"note {i}" for i in range(250)], concurrency=1)
        assert len(vectors) == 250
        assert [len(r.json()["requests"]) for r in server.requests] == [100, 100, 50]
        assert server.violations == []


def test_invalid_key_error_shape(clock: FakeClock) -> None:
    with GeminiServer() as server:
        cfg = parse_config({"provider": "gemini", "remote": {"baseUrl": server.base_url, "apiKey": "nope"}})
        with pytest.raises(EmbeddingError, match="API key not valid") as info:
            create_provider("gemini", cfg).embed_query("x")
        assert info.value.status == 400 and not info.value.retryable
