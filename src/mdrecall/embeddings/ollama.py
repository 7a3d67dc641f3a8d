"""``ollama``: a local or remote Ollama server, ``POST {baseUrl}/api/embed`` with a list of inputs.

``/api/embed`` takes many inputs per request (the older ``/api/embeddings`` took one prompt each).
nomic-embed-text expects task prefixes, so for that model the input types default to the prefixes
``search_query: `` and ``search_document: `` (set ``queryInputType``/``documentInputType`` to "" to send
texts unchanged). Never auto-selected unless ``providers.ollama`` is configured.
"""

from __future__ import annotations

from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.http import Clock, RemoteEmbeddingError, default_clock
from mdrecall.embeddings.remote import RemoteProvider
from mdrecall.embeddings.settings import (
    ProviderDefaults,
    ResolvedSettings,
    ensure_configured_for_auto,
    remote_endpoint_applies,
    resolve_settings,
)

DEFAULTS = ProviderDefaults(
    model="nomic-embed-text",
    base_url="http://127.0.0.1:11434",
    base_url_env="OLLAMA_HOST",
    key_env=("OLLAMA_API_KEY",),
    key_required=False,
    max_items=64,
    # Ollama's default context is 2048 tokens (num_ctx); longer inputs are truncated by the server.
    max_input_tokens=2048,
    needs_explicit_config=True,
)

NOMIC_PREFIXES = {"query": "search_query: ", "document": "search_document: "}


class OllamaEmbeddingProvider(RemoteProvider):
    id = "ollama"

    def __init__(self, settings: ResolvedSettings, *, clock: Clock | None = None) -> None:
        super().__init__(settings, clock=clock)
        self.client = self._json_client()

    def _request(self, texts: list[str], input_type: str) -> list[list[float]]:
        prefix = self.input_type(input_type) or ""
        body: dict[str, Any] = {"model": self.model, "input": [prefix + t for t in texts]}
        if self.settings.dimensions:
            body["dimensions"] = self.settings.dimensions
        payload = self.client.post_json("/api/embed", body)
        embeddings = payload.get("embeddings") if isinstance(payload, dict) else None
        if not isinstance(embeddings, list):
            raise RemoteEmbeddingError("ollama: response has no 'embeddings' list", retryable=True, kind="response")
        return embeddings


def create(config: MemoryConfig, clock: Clock | None = None) -> OllamaEmbeddingProvider:
    ensure_configured_for_auto(config, "ollama", DEFAULTS)
    defaults = DEFAULTS
    settings = resolve_settings(config, "ollama", defaults)
    if settings.model.split(":", 1)[0] == "nomic-embed-text":
        settings = _with_default_prefixes(config, settings)
    return OllamaEmbeddingProvider(settings, clock=clock or default_clock())


def _with_default_prefixes(config: MemoryConfig, settings: ResolvedSettings) -> ResolvedSettings:
    from dataclasses import replace

    section = config.providers.get("ollama")
    explicit = section.model_fields_set if section is not None else set()
    remote_explicit = config.remote.model_fields_set if remote_endpoint_applies(config, "ollama") else set()
    changes: dict[str, Any] = {}
    if "queryInputType" not in explicit and "queryInputType" not in remote_explicit:
        changes["query_input_type"] = NOMIC_PREFIXES["query"]
    if "documentInputType" not in explicit and "documentInputType" not in remote_explicit:
        changes["document_input_type"] = NOMIC_PREFIXES["document"]
    return replace(settings, **changes)
