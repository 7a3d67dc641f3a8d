"""``openai-compatible``: any base URL speaking OpenAI's embeddings format, key optional."""

from __future__ import annotations

import pytest
from provider_servers import FakeClock, OpenAIServer

from mdrecall.config import parse_config
from mdrecall.embeddings.registry import create_provider, select_provider


def test_keyless_server_gets_no_credentials_even_with_openai_env(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
    with OpenAIServer(api_key=None, prefix="/lmstudio/v1", models={"text-embedding-nomic-embed-text-v1.5": 768}) as server:
        cfg = parse_config({"provider": "openai-compatible", "model": "text-embedding-nomic-embed-text-v1.5",
                            "providers": {"openai-compatible": {"baseUrl": server.base_url}}})
        provider = create_provider("openai-compatible", cfg)
        assert provider.dims is None
        vectors = provider.embed_documents(["a", "b", "c"])
        (req,) = server.requests
        assert req.path == "/lmstudio/v1/embeddings"
        assert "authorization" not in req.headers and "x-leak" not in req.headers
        assert req.json() == {"model": "text-embedding-nomic-embed-text-v1.5", "input": ["a", "b", "c"], "encoding_format": "float"}
        assert len(vectors) == 3 and provider.dims == 768
        assert server.violations == []


def test_keyed_server_with_env_reference(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    monkeypatch.setenv("DEEPINFRA_TOKEN", "di-secret")
    with OpenAIServer(api_key="di-secret", prefix="/v1/openai", models={"BAAI/bge-m3": 1024}) as server:
        cfg = parse_config({"provider": "openai-compatible", "providers": {"openai-compatible": {
            "baseUrl": server.base_url, "model": "BAAI/bge-m3", "apiKey": "${DEEPINFRA_TOKEN}", "dimensions": 512}}})
        provider = create_provider("openai-compatible", cfg)
        assert len(provider.embed_query("q")) == 512
        req = server.requests[0]
        assert req.headers["authorization"] == "Bearer di-secret"
        assert req.json()["dimensions"] == 512 and req.json()["model"] == "BAAI/bge-m3"


def test_missing_base_url_or_model_fails_closed() -> None:
    sel = select_provider(parse_config({"provider": "openai-compatible", "model": "m"}))
    assert sel.provider is None and sel.failed_closed and "baseUrl" in (sel.unavailable_reason or "")
    sel = select_provider(parse_config({"provider": "openai-compatible", "remote": {"baseUrl": "http://127.0.0.1:9/v1"}}))
    assert sel.provider is None and "model" in (sel.unavailable_reason or "")
