"""The embedding provider contract.

A provider turns text into vectors. It is deliberately tiny (compare simonw/llm's one-method
``embed_batch``): the engine does batching, caching, retries and identity on top of it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol, Sequence, runtime_checkable


@runtime_checkable
class EmbeddingProvider(Protocol):
    #: Registry id, e.g. ``"local"``, ``"openai"``.
    id: str
    #: Model name as the provider knows it.
    model: str

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

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts for storage, one vector per text, in order."""

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (some providers use a different input type for queries)."""

    def count_tokens(self, text: str) -> int:
        """Tokens the model would see for ``text`` (an estimate is fine for remote models)."""

    # Optional: ``languages: tuple[str, ...] | None``, the ISO codes a model reads (None or absent:
    # unknown or multilingual). Search skips the vector side of a mostly-CJK query when the model
    # reads none of zh/ja/ko, instead of letting noise outrank keyword hits.


def provider_key(identity: dict[str, Any]) -> str:
    """Stable hash of a provider identity; part of the index identity and the cache key."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def estimate_tokens(text: str) -> int:
    """Word-piece estimate for models whose tokenizer is not available here.

    CJK characters are one token each (often more); other text about four characters a token.
    """
    cjk = sum(1 for ch in text if _is_cjk(ch))
    return cjk + (len(text) - cjk + 3) // 4


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (
        0x2E80 <= code <= 0x9FFF
        or 0xA000 <= code <= 0xA4FF
        or 0xAC00 <= code <= 0xD7AF
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x2FA1F
    )
