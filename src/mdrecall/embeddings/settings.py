"""Resolving one remote provider's settings from config, environment and built-in defaults.

Precedence for each key (later wins): the provider's built-in default < ``remote`` (endpoint keys only
when this provider is the configured ``provider``, or the ``fallback`` of a local/auto primary; retry,
timeout and concurrency keys always) < ``providers.<id>``. The top-level ``model`` applies to the
configured ``provider`` only, so a fallback keeps its own default model.

API keys: the configured value (a literal, a ``${ENV_VAR}`` reference, or the bare name of one of the
provider's key variables such as ``GEMINI_API_KEY``), else the provider's environment variables in
order. Secrets never enter ``identity`` or error messages.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from mdrecall.config import BatchConfig, MemoryConfig
from mdrecall.embeddings.http import RetryPolicy
from mdrecall.errors import ConfigError, ProviderUnavailableError

_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")

#: Keys of ``remote`` that apply to every remote provider.
SHARED_KEYS = ("concurrency", "timeoutSeconds", "maxRetrySeconds", "maxRetries")
#: Keys of ``remote`` that describe one endpoint.
ENDPOINT_KEYS = (
    "baseUrl",
    "apiKey",
    "headers",
    "dimensions",
    "maxItemsPerRequest",
    "maxInputTokens",
    "maxTokensPerRequest",
    "queryInputType",
    "documentInputType",
)


@dataclass(frozen=True)
class ProviderDefaults:
    model: str | None
    base_url: str | None
    #: Environment variables holding an API key, in lookup order.
    key_env: tuple[str, ...] = ()
    key_required: bool = True
    #: Environment variable that may hold the base URL (e.g. OLLAMA_HOST).
    base_url_env: str | None = None
    max_items: int = 64
    max_input_tokens: int = 8192
    max_tokens_per_request: int | None = None
    query_input_type: str | None = None
    document_input_type: str | None = None
    #: Only auto-selected when ``providers.<id>`` is configured (self-hosted servers).
    needs_explicit_config: bool = False


@dataclass(frozen=True)
class ResolvedSettings:
    provider_id: str
    model: str
    base_url: str
    api_key: str | None
    #: Where the key came from ("providers.openai.apiKey", "env OPENAI_API_KEY"), for status.
    api_key_source: str | None
    headers: dict[str, str]
    dimensions: int | None
    max_items: int
    max_input_tokens: int
    max_tokens_per_request: int | None
    query_input_type: str | None
    document_input_type: str | None
    concurrency: int
    timeout: float
    retry: RetryPolicy
    batch: BatchConfig
    options: dict[str, Any] = field(default_factory=dict)


def remote_endpoint_applies(config: MemoryConfig, provider_id: str) -> bool:
    if config.provider == provider_id:
        return True
    return config.provider in ("local", "none") and config.fallback == provider_id


def resolve_api_key(
    provider_id: str, configured: str | None, origin: str, key_env: tuple[str, ...]
) -> tuple[str | None, str | None]:
    if configured:
        match = _ENV_REF.match(configured.strip())
        name = match.group(1) if match else (configured if configured in key_env else None)
        if name is not None:
            value = os.environ.get(name)
            if not value:
                raise ProviderUnavailableError(f"{origin} refers to ${{{name}}}, which is not set")
            return value, f"env {name} (via {origin})"
        return configured, origin
    for name in key_env:
        value = os.environ.get(name)
        if value:
            return value, f"env {name}"
    return None, None


def _normalise_base_url(url: str, origin: str) -> str:
    url = url.strip()
    if "://" not in url:
        # OLLAMA_HOST is often "host:port" without a scheme.
        url = "http://" + url
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{origin} must be an http(s) URL, got {url!r}")
    return url.rstrip("/")


def resolve_settings(config: MemoryConfig, provider_id: str, defaults: ProviderDefaults) -> ResolvedSettings:
    remote = config.remote
    section = config.providers.get(provider_id)
    section_set = section.model_fields_set if section is not None else set()
    prefix = f"providers.{provider_id}"

    values: dict[str, Any] = {key: getattr(remote, key) for key in SHARED_KEYS}
    origins: dict[str, str] = {}
    headers: dict[str, str] = {}
    if remote_endpoint_applies(config, provider_id):
        for key in ENDPOINT_KEYS:
            if key in remote.model_fields_set and key != "headers":
                values[key] = getattr(remote, key)
                origins[key] = f"remote.{key}"
        headers.update(remote.headers)
    model = config.model if (config.provider == provider_id and config.model) else None
    if section is not None:
        for key in section_set:
            if key in ("headers", "options", "model"):
                continue
            if getattr(section, key) is not None:
                values[key] = getattr(section, key)
                origins[key] = f"{prefix}.{key}"
        if section.headers:
            headers.update(section.headers)
        if section.model:
            model = section.model
    model = model or defaults.model
    if not model:
        raise ProviderUnavailableError(f"no model configured: set {prefix}.model (or model with provider: {provider_id})")
    # "openai/text-embedding-3-small" style names: drop this provider's own prefix.
    if model.startswith(provider_id + "/"):
        model = model[len(provider_id) + 1 :]

    base_url = values.get("baseUrl")
    base_origin = origins.get("baseUrl", "")
    if not base_url and defaults.base_url_env and os.environ.get(defaults.base_url_env):
        base_url, base_origin = os.environ[defaults.base_url_env], f"env {defaults.base_url_env}"
    if not base_url:
        base_url, base_origin = defaults.base_url, "default"
    if not base_url:
        raise ProviderUnavailableError(f"no base URL configured: set {prefix}.baseUrl")
    base_url = _normalise_base_url(base_url, base_origin)

    api_key, key_source = resolve_api_key(
        provider_id, values.get("apiKey"), origins.get("apiKey", f"{prefix}.apiKey"), defaults.key_env
    )
    if api_key is None and defaults.key_required:
        where = f"{prefix}.apiKey" + (" or " + " / ".join(defaults.key_env) if defaults.key_env else "")
        ignored = (
            "; remote.apiKey applies only to an explicitly configured provider"
            if remote.apiKey and not remote_endpoint_applies(config, provider_id)
            else ""
        )
        raise ProviderUnavailableError(f"no API key: set {where}{ignored}")

    return ResolvedSettings(
        provider_id=provider_id,
        model=model,
        base_url=base_url,
        api_key=api_key,
        api_key_source=key_source,
        headers=headers,
        dimensions=values.get("dimensions"),
        max_items=values.get("maxItemsPerRequest") or defaults.max_items,
        max_input_tokens=values.get("maxInputTokens") or defaults.max_input_tokens,
        max_tokens_per_request=values.get("maxTokensPerRequest") or defaults.max_tokens_per_request,
        query_input_type=_input_type(values, "queryInputType", defaults.query_input_type),
        document_input_type=_input_type(values, "documentInputType", defaults.document_input_type),
        concurrency=int(values["concurrency"]),
        timeout=float(values["timeoutSeconds"]),
        retry=RetryPolicy(max_retries=int(values["maxRetries"]), max_total_seconds=float(values["maxRetrySeconds"])),
        batch=remote.batch,
        options=dict(section.options) if section is not None else {},
    )


def _input_type(values: dict[str, Any], key: str, default: str | None) -> str | None:
    # An explicit empty string switches a default input type (or prefix) off.
    if key in values and values[key] is not None:
        return values[key] or None
    return default


def ensure_configured_for_auto(config: MemoryConfig, provider_id: str, defaults: ProviderDefaults) -> None:
    """Self-hosted servers are auto-selected only when their ``providers.<id>`` section exists."""
    if defaults.needs_explicit_config and config.provider == "auto" and provider_id not in config.providers:
        raise ProviderUnavailableError(
            f"not configured (auto uses {provider_id} only when providers.{provider_id} is set)"
        )
