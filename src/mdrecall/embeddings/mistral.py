"""``mistral``: Mistral's ``POST {baseUrl}/embeddings`` (``mistral-embed``, 1024 dimensions)."""

from __future__ import annotations

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.http import Clock, default_clock
from mdrecall.embeddings.remote import RemoteProvider, openai_style_vectors
from mdrecall.embeddings.settings import ProviderDefaults, ResolvedSettings, resolve_settings

DEFAULTS = ProviderDefaults(
    model="mistral-embed",
    base_url="https://api.mistral.ai/v1",
    key_env=("MISTRAL_API_KEY",),
    # Mistral rejects requests with too many inputs ("split into more batches") and about 16k tokens
    # per request; 8192 tokens per input.
    max_items=128,
    max_input_tokens=8192,
    max_tokens_per_request=16_000,
)


class MistralEmbeddingProvider(RemoteProvider):
    id = "mistral"

    def __init__(self, settings: ResolvedSettings, *, clock: Clock | None = None) -> None:
        super().__init__(settings, clock=clock)
        self.client = self._json_client()

    def _request(self, texts: list[str], input_type: str) -> list[list[float]]:
        body: dict[str, object] = {"model": self.model, "input": texts}
        if self.settings.dimensions:
            body["output_dimension"] = self.settings.dimensions  # codestral-embed
        return openai_style_vectors(self.id, self.client.post_json("/embeddings", body), len(texts))


def create(config: MemoryConfig, clock: Clock | None = None) -> MistralEmbeddingProvider:
    settings = resolve_settings(config, "mistral", DEFAULTS)
    return MistralEmbeddingProvider(settings, clock=clock or default_clock())
