"""``voyage``: input_type query/document, output_dimension, bearer auth."""

from __future__ import annotations

import pytest
from provider_servers import FakeClock, Fault, VoyageServer

from mdrecall.config import parse_config
from mdrecall.embeddings.registry import create_provider
from mdrecall.errors import EmbeddingError


def _provider(server: VoyageServer, **section):
    cfg = parse_config({"provider": "voyage", "providers": {"voyage": {"baseUrl": server.base_url, "apiKey": server.api_key, **section}}})
    return create_provider("voyage", cfg)


def test_document_and_query_input_types(clock: FakeClock) -> None:
    with VoyageServer() as server:
        provider = _provider(server)
        provider.embed_documents(["a", "b"])
        provider.embed_query("q")
        docs, query = server.requests
        assert docs.path == query.path == "/v1/embeddings"
        assert docs.headers["authorization"] == "Bearer pa-test-voyage"
        assert docs.json() == {"input": ["a", "b"], "model": "voyage-4-large", "input_type": "document"}
        assert query.json() == {"input": ["q"], "model": "voyage-4-large", "input_type": "query"}
        assert provider.dims == 1024
        assert server.violations == []


def test_output_dimension_and_no_input_type(clock: FakeClock) -> None:
    with VoyageServer() as server:
        provider = _provider(server, dimensions=256, queryInputType="", documentInputType="")
        assert len(provider.embed_query("q")) == 256
        assert server.requests[0].json() == {"input": ["q"], "model": "voyage-4-large", "output_dimension": 256}
        assert provider.identity["inputTypes"] == {"query": None, "document": None}


def test_server_error_detail(clock: FakeClock) -> None:
    with VoyageServer() as server:
        server.queue(Fault(400, {"detail": "Input text too long"}))
        with pytest.raises(EmbeddingError, match="Input text too long"):
            _provider(server).embed_documents(["x"])
