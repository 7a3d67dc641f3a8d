"""``voyage``: Voyage AI's ``POST {baseUrl}/embeddings`` with ``input_type`` query or document."""

from __future__ import annotations

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.http import Clock, default_clock
from mdrecall.embeddings.remote import RemoteProvider, openai_style_vectors
from mdrecall.embeddings.settings import ProviderDefaults, ResolvedSettings, resolve_settings

DEFAULTS = ProviderDefaults(
    model="voyage-4-large",
    base_url="https://api.voyageai.com/v1",
    key_env=("VOYAGE_API_KEY",),
    # Voyage caps a request at 1000 inputs and, for its large models, 120k tokens; inputs at 32k.
    max_items=1000,
    max_input_tokens=32_000,
    max_tokens_per_request=120_000,
    query_input_type="query",
    document_input_type="document",
)


class VoyageEmbeddingProvider(RemoteProvider):
    id = "voyage"

    def __init__(self, settings: ResolvedSettings, *, clock: Clock | None = None) -> None:
        super().__init__(settings, clock=clock)
        self.client = self._json_client()

    def _request(self, texts: list[str], input_type: str) -> list[list[float]]:
        body: dict[str, object] = {"input": texts, "model": self.model}
        kind = self.input_type(input_type)
        if kind:
            body["input_type"] = kind
        if self.settings.dimensions:
            body["output_dimension"] = self.settings.dimensions
        return openai_style_vectors(self.id, self.client.post_json("/embeddings", body), len(texts))


def create(config: MemoryConfig, clock: Clock | None = None) -> VoyageEmbeddingProvider:
    settings = resolve_settings(config, "voyage", DEFAULTS)
    return VoyageEmbeddingProvider(settings, clock=clock or default_clock())
