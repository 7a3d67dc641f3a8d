"""``provider: auto`` order, skip reasons, explicit providers failing closed, and fallback switching."""

from __future__ import annotations

import pytest
from provider_servers import FakeClock, GeminiServer, OllamaServer, OpenAIServer

from mdrecall.config import parse_config
from mdrecall.embeddings.registry import activate_fallback, auto_priority, select_provider
from mdrecall.errors import EmbeddingError

# A local model that cannot load, so auto moves past local without loading the real one.
NO_LOCAL = {"local": {"model": "/nonexistent/local-model"}}


def test_auto_priority_order() -> None:
    assert auto_priority()[:7] == ["local", "ollama", "openai-compatible", "openai", "gemini", "voyage", "mistral"]


def test_auto_without_keys_is_keyword_only_with_reasons() -> None:
    sel = select_provider(parse_config(NO_LOCAL))
    assert sel.provider is None and not sel.failed_closed
    reasons = dict(sel.skipped)
    assert list(reasons) == ["local", "ollama", "openai-compatible", "openai", "gemini", "voyage", "mistral"]
    assert "cannot load local model" in reasons["local"]
    assert "OPENAI_API_KEY" in reasons["openai"] and "GEMINI_API_KEY" in reasons["gemini"]
    assert "providers.ollama is set" in reasons["ollama"]
    assert sel.unavailable_reason and sel.unavailable_reason.startswith("no embedding provider available")


def test_auto_picks_first_remote_provider_with_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "m")
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    sel = select_provider(parse_config(NO_LOCAL))
    assert sel.provider is not None and sel.provider.id == "gemini"
    assert [p for p, _ in sel.skipped] == ["local", "ollama", "openai-compatible", "openai"]
    monkeypatch.setenv("OPENAI_API_KEY", "o")
    assert select_provider(parse_config(NO_LOCAL)).provider.id == "openai"  # type: ignore[union-attr]


def test_auto_uses_configured_ollama_before_hosted_apis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "o")
    sel = select_provider(parse_config({**NO_LOCAL, "providers": {"ollama": {"baseUrl": "http://127.0.0.1:9"}}}))
    assert sel.provider is not None and sel.provider.id == "ollama"


def test_auto_prefers_local_when_it_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "o")
    sel = select_provider(parse_config({}))  # loads the bundled all-MiniLM-L6-v2 once
    assert sel.provider is not None and sel.provider.id == "local" and sel.skipped == []


def test_explicit_provider_without_key_fails_closed() -> None:
    sel = select_provider(parse_config({"provider": "voyage"}))
    assert sel.provider is None and sel.failed_closed
    assert "VOYAGE_API_KEY" in (sel.unavailable_reason or "")


def test_explicit_provider_falls_back_at_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    sel = select_provider(parse_config({"provider": "openai", "fallback": "gemini"}))
    assert sel.provider is not None and sel.provider.id == "gemini"
    assert sel.fallback_from == "openai" and "OPENAI_API_KEY" in (sel.fallback_reason or "")
    assert sel.to_dict()["fallbackFrom"] == "openai"


def test_runtime_fallback_switches_once_and_is_recorded(clock: FakeClock) -> None:
    with OpenAIServer() as openai_server, GeminiServer() as gemini_server:
        cfg = parse_config({
            "provider": "openai",
            "fallback": "gemini",
            "remote": {"baseUrl": openai_server.base_url, "apiKey": openai_server.api_key, "maxRetries": 1},
            "providers": {"gemini": {"baseUrl": gemini_server.base_url, "apiKey": gemini_server.api_key}},
        })
        sel = select_provider(cfg)
        assert sel.provider is not None and sel.provider.id == "openai"
        openai_server.close()  # the primary goes away mid-life
        with pytest.raises(EmbeddingError) as info:
            sel.provider.embed_documents(["a note"])
        switched = activate_fallback(sel, cfg, info.value)
        assert switched is not None and switched.provider is not None
        assert switched.provider.id == "gemini" and switched.provider.model == "gemini-embedding-001"
        assert switched.fallback_from == "openai" and "cannot reach" in (switched.fallback_reason or "")
        assert len(switched.provider.embed_documents(["a note"])) == 1
        # Once only: a failing fallback does not switch again.
        assert activate_fallback(switched, cfg, RuntimeError("again")) is None


def test_no_runtime_fallback_without_configuration(clock: FakeClock) -> None:
    with OllamaServer() as server:
        cfg = parse_config({"provider": "ollama", "providers": {"ollama": {"baseUrl": server.base_url}}})
        sel = select_provider(cfg)
        assert activate_fallback(sel, cfg, RuntimeError("boom")) is None
        auto = select_provider(parse_config({**NO_LOCAL, "providers": {"ollama": {"baseUrl": server.base_url}}}))
        assert activate_fallback(auto, cfg, RuntimeError("boom")) is None
