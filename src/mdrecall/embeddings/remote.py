"""What every remote provider shares: limits, identity, dimension checks, normalisation, batching.

A subclass implements ``_request(texts, input_type) -> vectors`` for one request of at most
``max_batch_items`` texts; ``embed_query`` may be overridden where the API has a separate query call.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from mdrecall.embeddings.base import BatchDoneFn, ProgressFn, ProviderBase
from mdrecall.embeddings.batching import embed_in_batches
from mdrecall.embeddings.http import Clock, JsonHttpClient, RemoteEmbeddingError, Retrier
from mdrecall.embeddings.settings import ResolvedSettings
from mdrecall.text import estimate_tokens

#: Retry limits for query embeddings (documents use remote.maxRetries / remote.maxRetrySeconds).
QUERY_MAX_RETRIES = 2
QUERY_MAX_RETRY_SECONDS = 10.0

#: Native output sizes of well-known models; a response of another size is refused.
KNOWN_DIMS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "gemini-embedding-001": 3072,
    "mistral-embed": 1024,
    "voyage-4-large": 1024,
    "voyage-4": 1024,
    "voyage-4-lite": 1024,
    "voyage-3.5": 1024,
    "voyage-3.5-lite": 1024,
    "voyage-3-large": 1024,
    "nomic-embed-text": 768,
}


class RemoteProvider(ProviderBase):
    id: str = "remote"

    def __init__(self, settings: ResolvedSettings, *, clock: Clock | None = None) -> None:
        self.settings = settings
        self.model = settings.model
        self.retrier = Retrier(self.id, settings.retry, clock)
        base_model = self.model.split(":", 1)[0]  # ollama tags: "nomic-embed-text:latest"
        self._expected_dims: int | None = settings.dimensions or KNOWN_DIMS.get(base_model)
        self._dims_lock = threading.Lock()
        #: Set by providers that support an asynchronous batch API (OpenAI).
        self.batch_api: Any = None

    # -- contract --------------------------------------------------------------------------------
    @property
    def dims(self) -> int | None:
        return self._expected_dims

    @property
    def identity(self) -> dict[str, Any]:
        s = self.settings
        return {
            "provider": self.id,
            "model": self.model,
            "baseUrl": s.base_url,
            "dimensions": s.dimensions,
            "inputTypes": {"query": s.query_input_type, "document": s.document_input_type},
        }

    @property
    def max_input_tokens(self) -> int:
        return self.settings.max_input_tokens

    @property
    def max_batch_items(self) -> int:
        return self.settings.max_items

    @property
    def max_batch_tokens(self) -> int | None:
        return self.settings.max_tokens_per_request

    @property
    def concurrency(self) -> int:
        return self.settings.concurrency

    @property
    def last_error(self) -> str | None:  # type: ignore[override]  # the retrier records it
        return self.retrier.last_error

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        return [estimate_tokens(t) for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        step = self.max_batch_items
        for start in range(0, len(texts), step):
            part = [self._fit(t) for t in texts[start : start + step]]
            out.extend(self._checked(self._request(part, "document"), len(part)))
        return out

    def embed_query(self, text: str) -> list[float]:
        # A search waits for this: two quick retries at most, then the engine answers keyword-only.
        with self.retrier.limited(QUERY_MAX_RETRIES, QUERY_MAX_RETRY_SECONDS, "the query retry limit"):
            return self._checked(self._request([self._fit(text)], "query"), 1)[0]

    def resolve_dims(self) -> int | None:
        """Learn the vector size with one probe request when neither config nor the model table says.

        The engine calls this before fixing the index identity, so the vector table is created on the
        first sync instead of after a rebuild.
        """
        if self._expected_dims is None:
            self.embed_query("dimension probe")
        return self._expected_dims

    def embed_documents_batched(
        self, texts: Sequence[str], progress: ProgressFn | None = None, on_batch: BatchDoneFn | None = None
    ) -> list[list[float]]:
        """Hook for the indexer: item- and token-bounded batches, ``concurrency`` at a time.

        ``on_batch(indexes, vectors)`` sees each finished batch, so a caller can cache them before a
        later batch fails."""
        return embed_in_batches(self, texts, concurrency=self.concurrency, progress=progress, on_batch=on_batch)

    def close(self) -> None:
        client: Any = getattr(self, "client", None)  # set by subclasses that hold an HTTP client
        if client is not None:
            client.close()

    # -- helpers for subclasses ------------------------------------------------------------------
    def _request(self, texts: list[str], input_type: str) -> list[list[float]]:
        raise NotImplementedError

    def _json_client(self) -> JsonHttpClient:
        """A JSON-over-HTTPS client with a bearer token when one is configured (most providers)."""
        settings = self.settings
        headers = {"Content-Type": "application/json", **settings.headers}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        return JsonHttpClient(self.id, settings.base_url, headers, settings.timeout, self.retrier)

    def input_type(self, kind: str) -> str | None:
        return self.settings.query_input_type if kind == "query" else self.settings.document_input_type

    def _fit(self, text: str) -> str:
        # Remote token counts are estimates; cut proportionally with a margin rather than be refused.
        tokens = estimate_tokens(text)
        limit = self.max_input_tokens
        if tokens <= limit:
            return text
        return text[: max(1, int(len(text) * limit / tokens * 0.9))]

    def _checked(self, vectors: list[list[float]], expected: int) -> list[list[float]]:
        if len(vectors) != expected:
            raise RemoteEmbeddingError(
                f"{self.id}: asked for {expected} embeddings, got {len(vectors)}", retryable=True, kind="response"
            )
        lengths = {len(v) if isinstance(v, list) else -1 for v in vectors}
        if len(lengths) != 1 or min(lengths) < 1:
            raise RemoteEmbeddingError(f"{self.id}: response holds embeddings of mixed or no length", kind="response")
        size = lengths.pop()
        with self._dims_lock:
            if self._expected_dims is None:
                self._expected_dims = size
            elif size != self._expected_dims:
                raise RemoteEmbeddingError(
                    f"{self.id}: model {self.model} returned {size}-dimensional vectors, expected "
                    f"{self._expected_dims}; refusing to mix vector sizes (check dimensions/model)",
                    kind="response",
                )
        try:
            matrix = np.asarray(vectors, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise RemoteEmbeddingError(f"{self.id}: response holds non-numeric embeddings", kind="response") from exc
        norms = np.linalg.norm(matrix, axis=1)
        if not np.all(np.isfinite(matrix)) or np.any(norms == 0):
            raise RemoteEmbeddingError(f"{self.id}: response holds zero-length or non-finite embeddings", kind="response")
        return (matrix / norms[:, None]).tolist()


def openai_style_vectors(provider_id: str, payload: Any, expected: int) -> list[list[float]]:
    """``{"data": [{"index": i, "embedding": [...]}, ...]}`` (OpenAI, Voyage, Mistral, compatible servers)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise RemoteEmbeddingError(f"{provider_id}: response has no 'data' list", retryable=True, kind="response")
    if all(isinstance(item, dict) and isinstance(item.get("index"), int) for item in data):
        data = sorted(data, key=lambda item: item["index"])
        if [item["index"] for item in data] != list(range(len(data))):
            raise RemoteEmbeddingError(f"{provider_id}: response indexes are not 0..{expected - 1}", kind="response")
    vectors = []
    for item in data:
        embedding = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(embedding, list):
            raise RemoteEmbeddingError(
                f"{provider_id}: response item has no float 'embedding' list", retryable=True, kind="response"
            )
        vectors.append(embedding)
    return vectors
