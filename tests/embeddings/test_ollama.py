"""``ollama``: POST /api/embed with many inputs, nomic task prefixes, no credentials by default."""

from __future__ import annotations

import pytest
from provider_servers import FakeClock, OllamaServer

from mdrecall.config import parse_config
from mdrecall.embeddings.registry import create_provider
from mdrecall.errors import EmbeddingError


def _provider(server: OllamaServer, **section):
    cfg = parse_config({"provider": "ollama", "providers": {"ollama": {"baseUrl": server.base_url, **section}}})
    return create_provider("ollama", cfg)


def test_embed_endpoint_with_nomic_prefixes(clock: FakeClock) -> None:
    with OllamaServer() as server:
        provider = _provider(server)
        assert len(provider.embed_documents(["note one", "note two"])[0]) == 768
        provider.embed_query("question")
        docs, query = server.requests
        assert (docs.method, docs.path) == ("POST", "/api/embed")
        assert "authorization" not in docs.headers
        assert docs.json() == {"model": "nomic-embed-text", "input": ["search_document: note one", "search_document: note two"]}
        assert query.json() == {"model": "nomic-embed-text", "input": ["search_query: question"]}
        assert provider.identity["inputTypes"] == {"query": "search_query: ", "document": "search_document: "}
        assert server.violations == []


def test_other_model_learns_dims_and_refuses_a_change(clock: FakeClock) -> None:
    with OllamaServer(models={"mxbai-embed-large": 1024}) as server:
        provider = _provider(server, model="mxbai-embed-large")
        assert provider.dims is None
        provider.embed_documents(["x"])
        assert provider.dims == 1024
        assert server.requests[0].json() == {"model": "mxbai-embed-large", "input": ["x"]}  # no prefixes
        server.models["mxbai-embed-large"] = 512  # the model behind the name changed
        with pytest.raises(EmbeddingError, match="refusing to mix"):
            provider.embed_documents(["y"])


def test_model_not_pulled(clock: FakeClock) -> None:
    with OllamaServer() as server:
        with pytest.raises(EmbeddingError, match='model "all-minilm" not found, try pulling it first') as info:
            _provider(server, model="all-minilm").embed_query("x")
        assert info.value.status == 404 and clock.sleeps == []


def test_ollama_host_env(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    with OllamaServer() as server:
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{server.port}")
        provider = create_provider("ollama", parse_config({"provider": "ollama"}))
        assert provider.settings.base_url == server.origin
        provider.embed_query("hi")
        assert len(server.requests) == 1
