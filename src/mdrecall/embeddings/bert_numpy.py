"""Embeddings for BERT-family sentence-transformers models in NumPy, without torch.

Importing sentence-transformers (and with it torch and transformers) takes ~9 s here, which a
one-shot ``mdrecall search`` paid for a single 12 ms query embedding. The local provider uses this
for queries and for small batches of documents (bigger ones go to sentence-transformers). This module runs the same
forward pass (embeddings, encoder layers, mean pooling, L2 normalisation) from the model's own
``model.safetensors`` and ``tokenizer.json``; tests check its vectors against the torch model's.
Only what the bundled all-MiniLM-L6-v2 uses is supported (``model_type: bert``, GELU, mean
pooling, normalise); anything else returns None from :func:`load_encoder` and the torch path is used.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def _erf(x: np.ndarray) -> np.ndarray:
    # erfc by the Chebyshev fit of Numerical Recipes (6.2), fractional error below 1.2e-7: float32
    # precision, and vectorised (math.erf per element cost 10 ms a query).
    z = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class NumpyBertEncoder:
    """One text at a time: ``encode(text) -> unit vector``."""

    def __init__(self, model_dir: Path, weights: dict[str, np.ndarray], config: dict, max_seq_length: int) -> None:
        from tokenizers import Tokenizer

        self._tokenizer_file = str(model_dir / "tokenizer.json")
        self.tokenizer = Tokenizer.from_file(self._tokenizer_file)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        self.max_seq_length = max_seq_length
        self.w = weights
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dims = int(config["hidden_size"])

    def counting_tokenizer(self):  # type: ignore[no-untyped-def]
        """The same tokenizer without truncation or padding: how many word pieces a text has."""
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(self._tokenizer_file)
        tok.no_padding()
        tok.no_truncation()
        return tok

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def encode(self, text: str) -> np.ndarray:
        ids = np.asarray(self.tokenizer.encode(text).ids, dtype=np.int64)
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: len(ids)]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        n, d = x.shape
        h = self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = self._linear(x, p + "attention.self.query").reshape(n, h, d // h).transpose(1, 0, 2)
            k = self._linear(x, p + "attention.self.key").reshape(n, h, d // h).transpose(1, 0, 2)
            v = self._linear(x, p + "attention.self.value").reshape(n, h, d // h).transpose(1, 0, 2)
            scores = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(d // h))
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(n, d)
            attn = self._linear(context, p + "attention.output.dense")
            x = _layer_norm(attn + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            ff = _gelu(self._linear(x, p + "intermediate.dense"))
            ff = self._linear(ff, p + "output.dense")
            x = _layer_norm(ff + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        pooled = x.mean(0)
        norm = float(np.linalg.norm(pooled)) or 1.0
        return (pooled / norm).astype(np.float32)


def load_encoder(model_dir: Path, max_seq_length: int | None = None) -> NumpyBertEncoder | None:
    """The NumPy encoder for a sentence-transformers directory, or None when it is not a plain
    mean-pooled, normalised BERT (then use sentence-transformers)."""
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
    return NumpyBertEncoder(model_dir, weights, config, limit)


__all__ = ["NumpyBertEncoder", "load_encoder"]
