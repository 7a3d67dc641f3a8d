"""The bundled model on onnxruntime: a graph built from the packaged weights, the same vectors as
NumPy and torch, the same provider identity, and NumPy when onnxruntime is missing."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")  # the local extra; without it the NumPy path runs (tested below too)

from mdrecall.embeddings import bert_numpy, bert_onnx, onnx_proto
from mdrecall.embeddings.base import provider_key
from mdrecall.embeddings.local import LocalEmbeddingProvider, _default_model_path

TEXTS = [
    "# 2026-11-05\n- Drop Safari 15 support.\n- Jonas wants a group-by-aisle option.",
    "王磊喜欢绿茶，不喝咖啡。" * 20,
    "x",
    "",
    "word " * 400,  # truncated to 256 word pieces
    "what did we decide about the launch?",
]
#: The key every index of the bundled model was built with (meta ``providerKey``): it must not
#: change with the runtime, or every existing index would be embedded again.
BUNDLED_KEY = "9da6699c1bc0141cf141531130d4e58d7aa32f45b271a060c4e5c279eee83679"


@pytest.fixture(scope="module")
def encoders() -> tuple[bert_onnx.OnnxBertEncoder, bert_numpy.NumpyBertEncoder]:
    path = Path(_default_model_path())
    onnx_encoder, numpy_encoder = bert_onnx.load_encoder(path), bert_numpy.load_encoder(path)
    assert onnx_encoder is not None and numpy_encoder is not None
    return onnx_encoder, numpy_encoder


def test_onnx_vectors_match_numpy(encoders) -> None:  # type: ignore[no-untyped-def]
    onnx_encoder, numpy_encoder = encoders
    reference = np.array([numpy_encoder.encode(t) for t in TEXTS])
    queries = np.array([onnx_encoder.encode(t) for t in TEXTS])
    documents = onnx_encoder.encode_many(TEXTS, workers=1)
    assert np.abs(queries - reference).max() < 1e-5
    assert np.abs(documents - reference).max() < 1e-5
    assert np.allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)


def test_onnx_vectors_match_torch(encoders, local_provider) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers")  # the torch extra: the reference implementation
    onnx_encoder, _ = encoders
    texts = [t for t in TEXTS if t]
    torch_vectors = np.array(local_provider._encode(texts))
    assert np.abs(onnx_encoder.encode_many(texts, workers=1) - torch_vectors).max() < 1e-5


def test_padded_runs_equal_single_texts(encoders) -> None:  # type: ignore[no-untyped-def]
    """The graph masks padding out of attention and pooling: a padded batch gives each text's own vector."""
    onnx_encoder, _ = encoders
    ids = [onnx_encoder.tokenizer.encode(t).ids for t in TEXTS]
    assert len({len(i) for i in ids}) > 2
    single = np.array([onnx_encoder.run([i])[0] for i in ids])
    assert np.abs(onnx_encoder.run(ids) - single).max() < 1e-5


def test_batches_keep_order_on_any_worker_count(encoders) -> None:  # type: ignore[no-untyped-def]
    onnx_encoder, _ = encoders
    texts = [f"note {i}: " + "the deploy moved to Thursday " * (i % 7 + 1) for i in range(13)] + ["x"]
    single = np.array([onnx_encoder.encode(t) for t in texts])
    for workers in (1, 2, 3):
        assert np.array_equal(onnx_encoder.encode_many(texts, workers=workers), single)
    assert onnx_encoder.encode_many([]).shape == (0, 384)


@pytest.mark.parametrize("runtime", ["onnxruntime", "numpy"])
def test_a_failed_batch_drops_the_texts_not_started(encoders, runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C during an embedding batch (or a text that fails) ends the batch: the texts not started
    are not embedded in the background anyway, which held `mdrecall index` and `mdrecall watch` for
    a whole batch (64 texts, 15 s on a loaded machine) after the interrupt."""
    encoder = encoders[0] if runtime == "onnxruntime" else encoders[1]
    calls: list[int] = []
    counter = itertools.count()

    def slow(*args: object) -> np.ndarray:
        n = next(counter)  # atomic: exactly one call fails
        calls.append(n)
        time.sleep(0.02)
        if n == 0:
            raise KeyboardInterrupt  # as Ctrl-C reaches the batch
        return np.zeros((1, encoder.dims), dtype=np.float32) if runtime == "onnxruntime" else np.zeros(encoder.dims, dtype=np.float32)

    monkeypatch.setattr(encoder, "run" if runtime == "onnxruntime" else "_forward", slow)
    with pytest.raises(KeyboardInterrupt):
        encoder.encode_many([f"text {i}" for i in range(40)], workers=2)
    pool = encoder._pool
    assert pool is not None
    pool.shutdown(wait=True)  # whatever was still queued has run by now
    encoder._pool = None
    # The other worker may start a few texts before the failure is seen (more on a loaded machine);
    # before the fix all 40 ran.
    assert len(calls) <= 10, f"{len(calls)} of 40 texts embedded after the batch failed"


def test_the_runtime_does_not_change_the_provider_identity() -> None:
    on_onnx, on_numpy = LocalEmbeddingProvider(runtime="onnxruntime"), LocalEmbeddingProvider(runtime="numpy")
    assert (on_onnx.runs_on, on_numpy.runs_on) == ("onnxruntime", "numpy")
    assert on_onnx.identity == on_numpy.identity
    assert provider_key(on_onnx.identity) == provider_key(on_numpy.identity) == BUNDLED_KEY
    assert on_onnx.runtime_note is None and on_numpy.runtime_note is None  # numpy chosen on purpose: nothing to say
    vectors = np.array(on_onnx.embed_documents(TEXTS)) - np.array(on_numpy.embed_documents(TEXTS))
    assert np.abs(vectors).max() < 1e-5


def test_the_default_runtime_is_onnxruntime(local_provider) -> None:  # type: ignore[no-untyped-def]
    assert local_provider.runs_on == "onnxruntime"


def test_an_unknown_runtime_is_refused() -> None:
    from mdrecall.errors import ProviderUnavailableError

    with pytest.raises(ProviderUnavailableError, match="local.runtime must be one of"):
        LocalEmbeddingProvider(runtime="tensorflow")


def test_the_protobuf_writer_builds_models_onnxruntime_runs() -> None:
    """Every kind of field onnx_proto writes (inline and external tensors, float, int and int-list
    attributes, negative ints, symbolic dimensions), checked by running the model."""
    import onnxruntime

    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    nodes = [
        onnx_proto.node("MatMul", ["x", "w"], ["m"]),
        onnx_proto.node("Add", ["m", "b"], ["a"]),
        onnx_proto.node("LeakyRelu", ["a"], ["r"], alpha=0.25),
        onnx_proto.node("Softmax", ["r"], ["s"], axis=-1),
        onnx_proto.node("ReduceSum", ["s", "axes"], ["y"], keepdims=0),
    ]
    inits = [
        onnx_proto.external_tensor("w", np.dtype(np.float32), w.shape, "weights", 0),
        onnx_proto.tensor("b", b),
        onnx_proto.tensor("axes", np.array([0], dtype=np.int64)),
    ]
    model = onnx_proto.model(
        nodes, inits, [onnx_proto.value_info("x", onnx_proto.FLOAT, ["n", 4])], [onnx_proto.value_info("y", onnx_proto.FLOAT, [6])],
        opset=17, ir_version=8, name="probe",
    )
    options = onnxruntime.SessionOptions()
    options.add_external_initializers(["w"], [onnxruntime.OrtValue.ortvalue_from_numpy(w)])
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    x = rng.standard_normal((3, 4)).astype(np.float32)
    a = x @ w + b
    r = np.where(a > 0, a, 0.25 * a)
    s = np.exp(r - r.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    (y,) = session.run(None, {"x": x})
    assert np.allclose(y, s.sum(0), atol=1e-6)


def test_each_run_gives_the_arena_back(encoders) -> None:  # type: ignore[no-untyped-def]
    """onnxruntime's arena kept its peak (texts of every length on several threads: ~35 MiB more
    in a long-lived server, issue 28): every run shrinks it, and glibc maps large blocks on their own
    so that what the arena frees leaves the process."""
    from mdrecall import heap

    encoder = encoders[0]
    assert encoder._run_options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    seen: list[object] = []
    session = encoder._session

    class Spy:
        def run(self, *args: object) -> object:
            seen.append(args[2] if len(args) > 2 else None)
            return session.run(*args)

    encoder._session = Spy()
    try:
        encoder.encode("a query")
        encoder.encode_many(["one text", "another text"], workers=2)
    finally:
        encoder._session = session
    assert seen and all(options is encoder._run_options for options in seen)
    if heap._malloc_trim() is not None:  # glibc
        assert heap._mapped
