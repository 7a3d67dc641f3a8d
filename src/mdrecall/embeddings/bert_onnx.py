"""The bundled BERT encoder on onnxruntime: the same forward pass as bert_numpy.py, ~2x less CPU.

No ONNX file is shipped or downloaded: the graph is written here, op by op, from the model's own
``model.safetensors`` (the weights bert_numpy.py reads; onnx_proto.py writes the protobuf), then
handed to onnxruntime in memory. Building it takes a fraction of a second per process, so there is no cache
on disk to go stale. The graph is the textbook BERT encoder (embeddings, LayerNorm, six layers of
self-attention and a GELU feed-forward, mean pooling over the attention mask, L2 normalisation);
onnxruntime runs it with its own GEMM (MLAS); the standard operators only, no contrib kernels. The vectors match the
NumPy and torch ones within 1e-5 (tests/embeddings), so the provider's identity, and every stored
vector, stays the same whichever runtime embeds.

Threads follow threads.py: every session runs one intra-op thread; a batch of documents is split
over :func:`threads.document_workers` threads of mdrecall's own calling ``run`` concurrently (an
onnxruntime session is safe to share), so a batch uses a known number of cores and a query runs on
the calling thread. Each text runs alone, unpadded: padded batches of similar length measured
slower here (their activations outgrow the core's cache; docs/benchmarks.md, "Encoders"), though
the graph takes an attention mask and so runs them correctly.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from mdrecall import heap, threads
from mdrecall.embeddings import onnx_proto

_OPSET = 17  # LayerNormalization; onnxruntime >= 1.14 runs it
_IR_VERSION = 8


def build_model(weights: dict[str, np.ndarray], config: dict[str, Any]) -> tuple[bytes, dict[str, np.ndarray]]:
    """The serialised ONNX model (``input_ids``, ``attention_mask``: int64, batch x length ->
    ``embedding``: float32, batch x hidden, unit rows) and its weights by name, to hand to
    onnxruntime as external initialisers (no copy of 90 MB through protobuf)."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dims = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    nodes: list[bytes] = []
    inits: list[bytes] = []
    external: dict[str, np.ndarray] = {}
    counter = [0]

    def const(array: np.ndarray) -> str:
        counter[0] += 1
        label = f"c{counter[0]}"
        if array.size > 16:  # weights: outside the protobuf
            external[label] = np.ascontiguousarray(array, dtype=np.float32)
            inits.append(onnx_proto.external_tensor(label, np.dtype(np.float32), array.shape, "weights", 0))
        else:
            inits.append(onnx_proto.tensor(label, array))
        return label

    def op(kind: str, inputs: list[str], output: str | None = None, **attrs: float | int | list[int]) -> str:
        counter[0] += 1
        out = output or f"t{counter[0]}"
        nodes.append(onnx_proto.node(kind, inputs, [out], **attrs))
        return out


    def f32(value: float) -> str:
        return const(np.array(value, dtype=np.float32))

    def i64(values: list[int]) -> str:
        return const(np.array(values, dtype=np.int64))

    def dense(x: str, prefix: str) -> str:
        w = const(np.ascontiguousarray(weights[prefix + ".weight"].T))
        return op("Add", [op("MatMul", [x, w]), const(weights[prefix + ".bias"])])

    def layer_norm(x: str, prefix: str) -> str:
        return op("LayerNormalization", [x, const(weights[prefix + ".weight"]), const(weights[prefix + ".bias"])], axis=-1, epsilon=eps)

    # Embeddings: word + position (rows 0..length-1) + token type 0, then LayerNorm.
    length = op("Gather", [op("Shape", ["input_ids"]), i64([1])])
    positions = op("Slice", [const(weights["embeddings.position_embeddings.weight"]), i64([0]), length, i64([0])])
    word = op("Gather", [const(weights["embeddings.word_embeddings.weight"]), "input_ids"])
    x = op("Add", [op("Add", [word, positions]), const(weights["embeddings.token_type_embeddings.weight"][0])])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Attention bias from the mask: 0 where a token is real, a large negative where it is padding.
    mask = op("Cast", ["attention_mask"], to=onnx_proto.FLOAT)
    bias = op("Mul", [op("Sub", [f32(1.0), op("Unsqueeze", [mask, i64([1, 2])])]), f32(-1e4)])
    split_heads = i64([0, 0, heads, head_dims])
    scale = f32(1.0 / math.sqrt(head_dims))
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        q = op("Transpose", [op("Reshape", [dense(x, p + "attention.self.query"), split_heads])], perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [dense(x, p + "attention.self.key"), split_heads])], perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [dense(x, p + "attention.self.value"), split_heads])], perm=[0, 2, 1, 3])
        scores = op("Add", [op("Mul", [op("MatMul", [q, k]), scale]), bias])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), i64([0, 0, hidden])])
        x = layer_norm(op("Add", [dense(context, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        up = dense(x, p + "intermediate.dense")
        gelu = op("Mul", [op("Mul", [up, f32(0.5)]), op("Add", [op("Erf", [op("Mul", [up, f32(1.0 / math.sqrt(2.0))])]), f32(1.0)])])
        x = layer_norm(op("Add", [dense(gelu, p + "output.dense"), x]), p + "output.LayerNorm")

    # Mean over the real tokens, then unit length.
    summed = op("ReduceSum", [op("Mul", [x, op("Unsqueeze", [mask, i64([2])])]), i64([1])], keepdims=0)
    pooled = op("Div", [summed, op("Max", [op("ReduceSum", [mask, i64([1])], keepdims=1), f32(1e-9)])])
    norm = op("Max", [op("ReduceL2", [pooled], axes=[1], keepdims=1), f32(1e-12)])
    op("Div", [pooled, norm], output="embedding")
    serialised = onnx_proto.model(
        nodes,
        inits,
        [
            onnx_proto.value_info("input_ids", onnx_proto.INT64, ["batch", "length"]),
            onnx_proto.value_info("attention_mask", onnx_proto.INT64, ["batch", "length"]),
        ],
        [onnx_proto.value_info("embedding", onnx_proto.FLOAT, ["batch", hidden])],
        opset=_OPSET,
        ir_version=_IR_VERSION,
        name="mdrecall-bert",
    )
    return serialised, external


class OnnxBertEncoder:
    """``encode(text) -> unit vector``; ``encode_many(texts)`` over the document worker threads.
    The same interface as :class:`bert_numpy.NumpyBertEncoder`."""

    runtime = "onnxruntime"

    def __init__(self, model_dir: Path, weights: dict[str, np.ndarray], config: dict[str, Any], max_seq_length: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self._tokenizer_file = str(model_dir / "tokenizer.json")
        self.tokenizer = Tokenizer.from_file(self._tokenizer_file)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        self.max_seq_length = max_seq_length
        self.dims = int(config["hidden_size"])
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # parallelism is ours (threads.py), never a second pool
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # warnings about unused initialisers are noise here
        serialised, external = build_model(weights, config)
        # onnxruntime reads these arrays in place: keep them alive with the session.
        self._weights = [onnxruntime.OrtValue.ortvalue_from_numpy(a) for a in external.values()]
        options.add_external_initializers(list(external), self._weights)
        self._session = onnxruntime.InferenceSession(serialised, options, providers=["CPUExecutionProvider"])
        # The arena keeps its peak: texts of every length, run by several threads at once, grew a
        # long-lived process by ~35 MiB (issue 28's soak, the MCP server). Each run now gives back
        # the arena's extensions (the first region stays), and glibc unmaps them (heap.py): RSS
        # flat over 2,000 random-length queries on 4 threads (+2.8 instead of +36 MiB), ~3 % more
        # CPU a query (docs/reliability.md, "Soak"). Turning the arena off cost 20-45 %.
        self._run_options = onnxruntime.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        heap.map_large_blocks()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def counting_tokenizer(self):  # type: ignore[no-untyped-def]
        """The same tokenizer without truncation or padding: how many word pieces a text has."""
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(self._tokenizer_file)
        tok.no_padding()
        tok.no_truncation()
        return tok

    def run(self, sequences: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors for token id sequences, in one call of the graph (shorter ones padded)."""
        longest = max(len(s) for s in sequences)
        ids = np.zeros((len(sequences), longest), dtype=np.int64)
        mask = np.zeros((len(sequences), longest), dtype=np.int64)
        for row, sequence in enumerate(sequences):
            ids[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1
        (out,) = self._session.run(["embedding"], {"input_ids": ids, "attention_mask": mask}, self._run_options)
        return np.asarray(out, dtype=np.float32)

    def encode(self, text: str) -> np.ndarray:
        """One text on the calling thread."""
        threads.configure()
        return self.run([self.tokenizer.encode(text).ids])[0]

    def encode_many(self, texts: Sequence[str], workers: int | None = None) -> np.ndarray:
        """Texts spread over ``workers`` threads (default :func:`threads.document_workers`), one
        text per call, longest first, returned in order."""
        threads.configure()
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        encoded = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        out = np.empty((len(texts), self.dims), dtype=np.float32)

        def run(i: int) -> None:
            out[i] = self.run([encoded[i]])[0]

        count = min(workers or threads.document_workers(), len(texts))
        if count <= 1:
            for i in range(len(texts)):
                run(i)
            return out
        # Longest first, so the last texts to start are short and the workers finish together.
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i]))
        futures = [self._executor(count).submit(run, i) for i in order]
        try:
            for future in futures:
                future.result()
        except BaseException:
            # Ctrl-C (or a failed text): drop the texts not started, or the pool's threads would
            # embed every one of them before the process could exit (as bert_numpy.py does).
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


def load_encoder(model_dir: Path, max_seq_length: int | None = None) -> OnnxBertEncoder | None:
    """The onnxruntime encoder for a directory :func:`bert_numpy.read_model` accepts, else None.
    Raises ImportError when onnxruntime is not installed."""
    import onnxruntime  # noqa: F401 - fail here, before reading 90 MB of weights

    from mdrecall.embeddings.bert_numpy import read_model

    heap.map_large_blocks()  # before the weights' temporaries raise glibc's own threshold
    model = read_model(model_dir, max_seq_length)
    if model is None:
        return None
    weights, config, limit = model
    try:
        return OnnxBertEncoder(model_dir, weights, config, limit)
    except KeyError:  # a BERT without the weights this graph reads
        return None


__all__ = ["OnnxBertEncoder", "build_model", "load_encoder"]
