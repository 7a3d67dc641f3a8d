"""``openai-compatible``: any server speaking OpenAI's ``POST {baseUrl}/embeddings`` (LM Studio, vLLM,
llama.cpp server, DeepInfra, LiteLLM, ...).

Plain httpx rather than the ``openai`` SDK: the SDK reads ``OPENAI_*`` environment variables (key,
organisation, project, custom headers) that must never travel to a third-party server. ``baseUrl`` and
``model`` are required; the API key is optional and only sent when configured.
"""

from __future__ import annotations

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.http import Clock, default_clock
from mdrecall.embeddings.remote import RemoteProvider, openai_style_vectors
from mdrecall.embeddings.settings import (
    ProviderDefaults,
    ResolvedSettings,
    ensure_configured_for_auto,
    resolve_settings,
)

DEFAULTS = ProviderDefaults(
    model=None,
    base_url=None,
    key_env=(),
    key_required=False,
    # Self-hosted servers vary (llama.cpp reads each input within its batch size); stay modest.
    max_items=64,
    max_input_tokens=8192,
    max_tokens_per_request=None,
    needs_explicit_config=True,
)


class OpenAICompatibleEmbeddingProvider(RemoteProvider):
    id = "openai-compatible"

    def __init__(self, settings: ResolvedSettings, *, clock: Clock | None = None) -> None:
        super().__init__(settings, clock=clock)
        self.client = self._json_client()

    def _request(self, texts: list[str], input_type: str) -> list[list[float]]:
        body: dict[str, object] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.settings.dimensions:
            body["dimensions"] = self.settings.dimensions
        return openai_style_vectors(self.id, self.client.post_json("/embeddings", body), len(texts))


def create(config: MemoryConfig, clock: Clock | None = None) -> OpenAICompatibleEmbeddingProvider:
    ensure_configured_for_auto(config, "openai-compatible", DEFAULTS)
    settings = resolve_settings(config, "openai-compatible", DEFAULTS)
    return OpenAICompatibleEmbeddingProvider(settings, clock=clock or default_clock())
