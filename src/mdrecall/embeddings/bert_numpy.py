"""Embeddings for BERT-family sentence-transformers models in NumPy, without torch.

The local provider runs the bundled all-MiniLM-L6-v2 here, for queries and documents alike:
importing sentence-transformers (torch, transformers) takes ~9 s and ~600 MiB, and a default
install does not carry torch at all. This module runs the same forward pass (embeddings, encoder
layers, mean pooling, L2 normalisation) from the model's own ``model.safetensors`` and
``tokenizer.json``; tests check its vectors against the torch model's. Only what the bundled model
uses is supported (``model_type: bert``, GELU, mean pooling, normalise); anything else returns None
from :func:`load_encoder` and the provider uses sentence-transformers (the ``torch`` extra).

Speed (docs/benchmarks.md): each text runs unpadded, one text per thread, BLAS single-threaded
(threads.py), so a batch of documents costs what its tokens cost and uses a known number of cores.
The products are near the core's peak; what made this path slower than torch was GELU's erf,
computed in float64 (half of the forward pass), now a float32 approximation as accurate as the
float32 result (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from mdrecall import threads

_SQRT_HALF = np.float32(math.sqrt(0.5))
# Abramowitz & Stegun 7.1.26: erf(x) = 1 - t(a1 + t(a2 + t(a3 + t(a4 + t a5)))) e^(-x²), t = 1/(1 + p x).
_P = np.float32(0.3275911)
_A = [np.float32(c) for c in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]


def _erf(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    t = 1.0 / (1.0 + _P * a)
    poly = _A[4]
    for coefficient in (_A[3], _A[2], _A[1], _A[0]):
        poly = poly * t + coefficient
    y = 1.0 - poly * t * np.exp(-a * a)
    return np.copysign(y, x)


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (np.float32(1.0) + _erf(x * _SQRT_HALF))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


class _Layer:
    """One encoder layer's weights, transposed once so every product is ``x @ W``."""

    def __init__(self, w: dict[str, np.ndarray], prefix: str) -> None:
        def t(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[prefix + name + ".weight"].T)

        # Query, key and value in one product (384 -> 1152).
        self.qkv = np.ascontiguousarray(np.concatenate([t("attention.self.query"), t("attention.self.key"), t("attention.self.value")], axis=1))
        self.qkv_bias = np.concatenate([w[prefix + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
        self.out, self.out_bias = t("attention.output.dense"), w[prefix + "attention.output.dense.bias"]
        self.ln1 = (w[prefix + "attention.output.LayerNorm.weight"], w[prefix + "attention.output.LayerNorm.bias"])
        self.up, self.up_bias = t("intermediate.dense"), w[prefix + "intermediate.dense.bias"]
        self.down, self.down_bias = t("output.dense"), w[prefix + "output.dense.bias"]
        self.ln2 = (w[prefix + "output.LayerNorm.weight"], w[prefix + "output.LayerNorm.bias"])


class NumpyBertEncoder:
    """``encode(text) -> unit vector``; ``encode_many(texts)`` over the document worker threads."""

    runtime = "numpy"

    def __init__(self, model_dir: Path, weights: dict[str, np.ndarray], config: dict[str, Any], max_seq_length: int) -> None:
        from tokenizers import Tokenizer

        self._tokenizer_file = str(model_dir / "tokenizer.json")
        self.tokenizer = Tokenizer.from_file(self._tokenizer_file)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        self.max_seq_length = max_seq_length
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dims = int(config["hidden_size"])
        self._word = weights["embeddings.word_embeddings.weight"]
        self._position = weights["embeddings.position_embeddings.weight"]
        self._token_type = weights["embeddings.token_type_embeddings.weight"][0]
        self._ln = (weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
        self._layers = [_Layer(weights, f"encoder.layer.{i}.") for i in range(int(config["num_hidden_layers"]))]
        self._scale = np.float32(1.0 / math.sqrt(self.dims // self.heads))
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def counting_tokenizer(self):  # type: ignore[no-untyped-def]
        """The same tokenizer without truncation or padding: how many word pieces a text has."""
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(self._tokenizer_file)
        tok.no_padding()
        tok.no_truncation()
        return tok

    def _forward(self, ids: Sequence[int]) -> np.ndarray:
        n = len(ids)
        x = self._word[np.asarray(ids, dtype=np.int64)] + self._position[:n] + self._token_type
        x = _layer_norm(x, *self._ln, self.eps)
        d, h = self.dims, self.heads
        for layer in self._layers:
            qkv = (x @ layer.qkv + layer.qkv_bias).reshape(n, 3, h, d // h).transpose(1, 2, 0, 3)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 2, 1)) * self._scale
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(n, d)
            x = _layer_norm(context @ layer.out + layer.out_bias + x, *layer.ln1, self.eps)
            ff = _gelu(x @ layer.up + layer.up_bias) @ layer.down + layer.down_bias
            x = _layer_norm(ff + x, *layer.ln2, self.eps)
        pooled = x.mean(0)
        norm = float(np.linalg.norm(pooled)) or 1.0
        return (pooled / norm).astype(np.float32)

    def encode(self, text: str) -> np.ndarray:
        """One text on the calling thread (query-sized work: single-threaded BLAS)."""
        threads.configure()
        return self._forward(self.tokenizer.encode(text).ids)

    def encode_many(self, texts: Sequence[str], workers: int | None = None) -> np.ndarray:
        """Texts spread over ``workers`` threads (default :func:`threads.document_workers`), in order."""
        threads.configure()
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        encoded = self.tokenizer.encode_batch(list(texts))
        count = min(workers or threads.document_workers(), len(texts))
        if count <= 1:
            return np.stack([self._forward(e.ids) for e in encoded])
        # Longest first, so the last texts to start are short and the workers finish together.
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].ids))
        out = np.empty((len(texts), self.dims), dtype=np.float32)

        def run(i: int) -> None:
            out[i] = self._forward(encoded[i].ids)

        futures = [self._executor(count).submit(run, i) for i in order]
        try:
            for future in futures:
                future.result()
        except BaseException:
            # Ctrl-C (or a failed text): drop the texts not started, or the pool's threads would
            # embed every one of them before the process could exit.
            for future in futures:
                future.cancel()
            raise
        return out

    def _executor(self, count: int) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None or self._pool._max_workers != count:
                if self._pool is not None:
                    self._pool.shutdown(wait=False)
                self._pool = ThreadPoolExecutor(count, thread_name_prefix="mdrecall-embed")
            return self._pool


def read_model(model_dir: Path, max_seq_length: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any], int] | None:
    """The weights (float32, ``bert.`` prefix dropped), ``config.json`` and input limit of a
    sentence-transformers directory, or None when it is not a plain mean-pooled, normalised BERT
    (then use sentence-transformers). Both encoders (this one, bert_onnx.py) run what this accepts."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        st_config = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kinds = [m.get("type", "") for m in modules]
    if (
        config.get("model_type") != "bert"
        or config.get("hidden_act") != "gelu"
        or kinds != ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling", "sentence_transformers.models.Normalize"]
        or not pooling.get("pooling_mode_mean_tokens")
        or any(pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens"))
        or st_config.get("do_lower_case")
        or not (model_dir / "model.safetensors").is_file()
        or not (model_dir / "tokenizer.json").is_file()
    ):
        return None
    try:
        from safetensors.numpy import load_file

        weights = load_file(str(model_dir / "model.safetensors"))
    except Exception:
        return None
    weights = {k.removeprefix("bert."): v.astype(np.float32, copy=False) for k, v in weights.items()}
    if "embeddings.word_embeddings.weight" not in weights:
        return None
    limit = int(st_config.get("max_seq_length", 256))
    if max_seq_length is not None:
        limit = min(limit, max_seq_length)
    return weights, config, limit


def load_encoder(model_dir: Path, max_seq_length: int | None = None) -> NumpyBertEncoder | None:
    """The NumPy encoder for a sentence-transformers directory, or None when :func:`read_model`
    does not accept it."""
    model = read_model(model_dir, max_seq_length)
    if model is None:
        return None
    weights, config, limit = model
    try:
        return NumpyBertEncoder(model_dir, weights, config, limit)
    except (KeyError, ValueError):  # a BERT without the weights this forward pass reads
        return None


__all__ = ["NumpyBertEncoder", "load_encoder", "read_model"]
