"""The embedding provider contract.

A provider turns text into vectors. It is deliberately tiny (compare simonw/llm's one-method
``embed_batch``): the engine does batching, caching, retries and identity on top of it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from mdrecall.text import estimate_tokens

#: ``progress(completed_texts, total_texts)``
ProgressFn = Callable[[int, int], None]
#: ``on_batch(indexes, vectors)``: one finished batch, so a caller can cache it before a later one fails.
BatchDoneFn = Callable[[list[int], list[list[float]]], None]


@runtime_checkable
class EmbeddingProvider(Protocol):
    """What the engine uses of a provider. Subclass :class:`ProviderBase`: it fills in every member
    but ``embed_documents``/``embed_query`` and the properties that describe the model.

    Calls come from any thread: a search embeds its query on a helper thread while it does its
    keyword work (search/ahead.py), and the async API runs searches on worker threads."""

    #: Registry id, e.g. ``"local"``, ``"openai"``.
    id: str
    #: Model name as the provider knows it.
    model: str
    #: ISO codes of the languages the model reads; None: multilingual or unknown. Search skips the
    #: vector side of a mostly-CJK query when the model reads none of zh/ja/ko.
    languages: tuple[str, ...] | None

    @property
    def last_error(self) -> str | None:
        """The last failed call (retried or not), for status; None when there was none."""
    #: An asynchronous batch API for large inputs (OpenAI), or None.
    batch_api: Any

    @property
    def dims(self) -> int | None:
        """Vector length, or None until the first embedding is made."""

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes what vectors mean (provider, model, base URL, dimensions, input
        types). Never secrets. Hashed into ``provider_key``."""

    @property
    def max_input_tokens(self) -> int:
        """Largest input the model reads; longer text is truncated by the model."""

    @property
    def max_batch_items(self) -> int:
        """Most texts per request."""

    @property
    def max_batch_tokens(self) -> int | None:
        """Most tokens per request, when the API limits them."""

    @property
    def concurrency(self) -> int:
        """Requests in flight at once."""

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts for storage, one vector per text, in order."""

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (some providers use a different input type for queries)."""

    def count_tokens(self, text: str) -> int:
        """Tokens the model would see for ``text`` (an estimate is fine for remote models)."""

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]: ...

    def embed_documents_batched(
        self, texts: Sequence[str], progress: ProgressFn | None = None, on_batch: BatchDoneFn | None = None
    ) -> list[list[float]]:
        """Embed many documents, reporting progress and each finished batch."""

    def resolve_dims(self) -> int | None:
        """Learn the vector size (one probe for remote models of unknown size)."""

    def close(self) -> None:
        """Release connections."""


class ProviderBase:
    """Defaults for everything but the model itself: a provider implements ``embed_documents``,
    ``embed_query``, ``dims``, ``identity``, ``max_input_tokens`` and ``max_batch_items``."""

    id: str = "custom"
    model: str = ""
    languages: tuple[str, ...] | None = None
    last_error: str | None = None
    batch_api: Any = None

    @property
    def max_batch_tokens(self) -> int | None:
        return None

    @property
    def concurrency(self) -> int:
        return 1

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count_tokens(t) for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError

    def embed_documents_batched(
        self, texts: Sequence[str], progress: ProgressFn | None = None, on_batch: BatchDoneFn | None = None
    ) -> list[list[float]]:
        # One call: a local model batches internally at its best size.
        vectors = self.embed_documents(texts)
        if on_batch is not None:
            on_batch(list(range(len(vectors))), vectors)
        if progress is not None:
            progress(len(vectors), len(texts))
        return vectors

    def resolve_dims(self) -> int | None:
        return getattr(self, "dims", None)

    def close(self) -> None:
        return None


def provider_key(identity: dict[str, Any]) -> str:
    """Stable hash of a provider identity; part of the index identity and the cache key."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
