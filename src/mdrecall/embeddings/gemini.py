"""``gemini``: Google's Generative Language API (``gemini-embedding-001``).

Documents go through ``POST {base}/models/{model}:batchEmbedContents`` with task type
``RETRIEVAL_DOCUMENT``; queries through ``:embedContent`` with ``RETRIEVAL_QUERY``. The key travels in
the ``x-goog-api-key`` header, never in the URL. ``dimensions`` becomes ``outputDimensionality``; vectors
are normalised here because Gemini only normalises its full 3072-dimensional output.
"""

from __future__ import annotations

from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.http import Clock, JsonHttpClient, RemoteEmbeddingError, default_clock
from mdrecall.embeddings.remote import RemoteProvider
from mdrecall.embeddings.settings import ProviderDefaults, ResolvedSettings, resolve_settings

DEFAULTS = ProviderDefaults(
    model="gemini-embedding-001",
    base_url="https://generativelanguage.googleapis.com/v1beta",
    key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    # batchEmbedContents takes at most 100 requests; gemini-embedding-001 reads 2048 tokens per input.
    max_items=100,
    max_input_tokens=2048,
    max_tokens_per_request=None,
    query_input_type="RETRIEVAL_QUERY",
    document_input_type="RETRIEVAL_DOCUMENT",
)


class GeminiEmbeddingProvider(RemoteProvider):
    id = "gemini"

    def __init__(self, settings: ResolvedSettings, *, clock: Clock | None = None) -> None:
        super().__init__(settings, clock=clock)
        name = settings.model if settings.model.startswith("models/") else f"models/{settings.model}"
        self._resource = name
        headers = {"x-goog-api-key": settings.api_key or "", "Content-Type": "application/json", **settings.headers}
        self.client = JsonHttpClient(self.id, settings.base_url, headers, settings.timeout, self.retrier)

    def _content_request(self, text: str, kind: str) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self._resource, "content": {"parts": [{"text": text}]}}
        task = self.input_type(kind)
        if task:
            request["taskType"] = task
        if self.settings.dimensions:
            request["outputDimensionality"] = self.settings.dimensions
        return request

    def _request(self, texts: list[str], input_type: str) -> list[list[float]]:
        if input_type == "query" and len(texts) == 1:
            payload = self.client.post_json(f"/{self._resource}:embedContent", self._content_request(texts[0], "query"))
            embedding = payload.get("embedding") if isinstance(payload, dict) else None
            values = embedding.get("values") if isinstance(embedding, dict) else None
            if not isinstance(values, list):
                raise RemoteEmbeddingError("gemini: response has no embedding.values", retryable=True, kind="response")
            return [values]
        body = {"requests": [self._content_request(t, input_type) for t in texts]}
        payload = self.client.post_json(f"/{self._resource}:batchEmbedContents", body)
        embeddings = payload.get("embeddings") if isinstance(payload, dict) else None
        if not isinstance(embeddings, list):
            raise RemoteEmbeddingError("gemini: response has no 'embeddings' list", retryable=True, kind="response")
        vectors = []
        for item in embeddings:
            values = item.get("values") if isinstance(item, dict) else None
            if not isinstance(values, list):
                raise RemoteEmbeddingError("gemini: embedding without 'values'", retryable=True, kind="response")
            vectors.append(values)
        return vectors


def create(config: MemoryConfig, clock: Clock | None = None) -> GeminiEmbeddingProvider:
    settings = resolve_settings(config, "gemini", DEFAULTS)
    return GeminiEmbeddingProvider(settings, clock=clock or default_clock())
