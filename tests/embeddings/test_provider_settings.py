"""Keys, base URLs, headers, models and limits: where each comes from, and what reaches the wire."""

from __future__ import annotations

import pytest
from provider_servers import FakeClock, GeminiServer, OpenAIServer, VoyageServer

from mdrecall.config import parse_config
from mdrecall.embeddings.base import provider_key
from mdrecall.embeddings.gemini import DEFAULTS as GEMINI_DEFAULTS
from mdrecall.embeddings.openai_provider import DEFAULTS as OPENAI_DEFAULTS
from mdrecall.embeddings.registry import create_provider
from mdrecall.embeddings.settings import resolve_settings
from mdrecall.errors import ConfigError, ProviderUnavailableError


def test_key_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    s = resolve_settings(parse_config({"provider": "openai"}), "openai", OPENAI_DEFAULTS)
    assert s.api_key == "sk-env" and s.api_key_source == "env OPENAI_API_KEY"
    assert s.base_url == "https://api.openai.com/v1" and s.model == "text-embedding-3-small"


def test_key_from_env_reference_and_missing_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SECRET", "sk-ref")
    cfg = parse_config({"provider": "openai", "remote": {"apiKey": "${MY_SECRET}"}})
    s = resolve_settings(cfg, "openai", OPENAI_DEFAULTS)
    assert s.api_key == "sk-ref" and "MY_SECRET" in (s.api_key_source or "")
    cfg = parse_config({"provider": "openai", "remote": {"apiKey": "${NOT_SET_ANYWHERE}"}})
    with pytest.raises(ProviderUnavailableError, match=r"\$\{NOT_SET_ANYWHERE\}, which is not set"):
        resolve_settings(cfg, "openai", OPENAI_DEFAULTS)


def test_gemini_key_env_order_and_bare_variable_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "g-google")
    assert resolve_settings(parse_config({}), "gemini", GEMINI_DEFAULTS).api_key == "g-google"
    monkeypatch.setenv("GEMINI_API_KEY", "g-gemini")
    assert resolve_settings(parse_config({}), "gemini", GEMINI_DEFAULTS).api_key == "g-gemini"
    # The reference system accepts the variable's bare name as the key value.
    cfg = parse_config({"provider": "gemini", "remote": {"apiKey": "GOOGLE_API_KEY"}})
    assert resolve_settings(cfg, "gemini", GEMINI_DEFAULTS).api_key == "g-google"


def test_config_key_wins_over_env_and_providers_section_wins_over_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    cfg = parse_config({
        "provider": "openai",
        "remote": {"apiKey": "sk-remote", "baseUrl": "https://proxy.example/v1", "headers": {"X-A": "remote", "X-B": "remote"}},
        "providers": {"openai": {"apiKey": "sk-section", "headers": {"X-B": "section"}, "model": "text-embedding-3-large"}},
    })
    s = resolve_settings(cfg, "openai", OPENAI_DEFAULTS)
    assert s.api_key == "sk-section" and s.api_key_source == "providers.openai.apiKey"
    assert s.base_url == "https://proxy.example/v1"
    assert s.headers == {"X-A": "remote", "X-B": "section"}
    assert s.model == "text-embedding-3-large"


def test_remote_endpoint_keys_do_not_leak_to_other_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    # remote.apiKey belongs to the configured provider; an auto-selected gemini must not send it to Google.
    cfg = parse_config({"provider": "auto", "remote": {"apiKey": "sk-openai-secret"}})
    with pytest.raises(ProviderUnavailableError, match="remote.apiKey applies only to an explicitly configured provider"):
        resolve_settings(cfg, "gemini", GEMINI_DEFAULTS)
    # ... but the shared retry/timeout keys apply to every provider.
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    cfg = parse_config({"provider": "openai", "remote": {"apiKey": "sk", "maxRetrySeconds": 42, "timeoutSeconds": 7}})
    s = resolve_settings(cfg, "gemini", GEMINI_DEFAULTS)
    assert s.api_key == "g" and s.retry.max_total_seconds == 42 and s.timeout == 7


def test_remote_applies_to_fallback_of_local_primary() -> None:
    cfg = parse_config({"provider": "local", "fallback": "openai", "remote": {"apiKey": "sk-fb"}})
    assert resolve_settings(cfg, "openai", OPENAI_DEFAULTS).api_key == "sk-fb"


def test_top_level_model_only_for_the_configured_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    cfg = parse_config({"provider": "openai", "model": "openai/text-embedding-3-large", "fallback": "gemini"})
    assert resolve_settings(cfg, "openai", OPENAI_DEFAULTS).model == "text-embedding-3-large"  # prefix stripped
    assert resolve_settings(cfg, "gemini", GEMINI_DEFAULTS).model == "gemini-embedding-001"


def test_base_url_env_and_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.example/openai/v1/")
    assert resolve_settings(parse_config({}), "openai", OPENAI_DEFAULTS).base_url == "https://gateway.example/openai/v1"
    cfg = parse_config({"provider": "openai", "remote": {"baseUrl": "ftp://nope"}})
    with pytest.raises(ConfigError, match="http"):
        resolve_settings(cfg, "openai", OPENAI_DEFAULTS)


def test_unknown_keys_in_providers_section_are_rejected() -> None:
    with pytest.raises(ConfigError, match="providers.openai.apikey"):
        parse_config({"providers": {"openai": {"apikey": "typo"}}})
    with pytest.raises(ConfigError, match="providers.gemini.dimensions"):
        parse_config({"providers": {"gemini": {"dimensions": 0}}})


def test_identity_has_what_changes_vectors_and_no_secrets(clock: FakeClock) -> None:
    with GeminiServer() as server:
        base = {"baseUrl": server.base_url, "apiKey": server.api_key, "headers": {"X-Secret-Header": "hdr"}}
        p1 = create_provider("gemini", parse_config({"provider": "gemini", "providers": {"gemini": base}}))
        p2 = create_provider("gemini", parse_config({"provider": "gemini", "providers": {"gemini": {**base, "dimensions": 768}}}))
        p3 = create_provider("gemini", parse_config({"provider": "gemini", "providers": {"gemini": {**base, "apiKey": "other"}}}))
        assert p1.identity == {
            "provider": "gemini", "model": "gemini-embedding-001", "baseUrl": server.base_url, "dimensions": None,
            "inputTypes": {"query": "RETRIEVAL_QUERY", "document": "RETRIEVAL_DOCUMENT"},
        }
        blob = repr(p1.identity) + repr(p2.identity)
        assert server.api_key not in blob and "hdr" not in blob
        assert provider_key(p1.identity) != provider_key(p2.identity)  # dimensions change vectors
        assert provider_key(p1.identity) == provider_key(p3.identity)  # a new key does not
        assert p1.dims == 3072 and p2.dims == 768


def test_extra_headers_and_auth_reach_the_wire(clock: FakeClock) -> None:
    with VoyageServer() as server:
        cfg = parse_config({"provider": "voyage", "remote": {"baseUrl": server.base_url, "apiKey": server.api_key,
                                                                "headers": {"X-Team": "memory"}}})
        create_provider("voyage", cfg).embed_query("hello")
        headers = server.requests[0].headers
        assert headers["authorization"] == f"Bearer {server.api_key}"
        assert headers["x-team"] == "memory"
        assert server.violations == []


def test_openai_sdk_never_sends_env_key_to_a_configured_server(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-env")
    with OpenAIServer(api_key="sk-configured") as server:
        cfg = parse_config({"provider": "openai", "remote": {"baseUrl": server.base_url, "apiKey": "sk-configured"}})
        create_provider("openai", cfg).embed_query("hi")
        headers = server.requests[0].headers
        assert headers["authorization"] == "Bearer sk-configured"
        assert headers["openai-organization"] == "org-env"  # the SDK's own OpenAI settings still apply
