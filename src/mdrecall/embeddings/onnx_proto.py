"""Just enough of ONNX's protobuf encoding to write a model that onnxruntime loads.

Why not the ``onnx`` package: importing it costs ~1.4 s of CPU per process (its ``ml_dtypes``
extension), more than loading the whole model, and bert_onnx.py builds its graph at every start
instead of keeping a file on disk. The few messages used here are written field by field from
onnx.proto (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto, field numbers stable since
IR version 3): ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto.
tests/embeddings/test_onnx_proto.py parses the output with the ``onnx`` package where installed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

FLOAT, INT64 = 1, 7  # TensorProto.DataType
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType
_DTYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s are ten bytes of two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, payload: bytes | bytearray | memoryview) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(payload)) + bytes(payload)


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode("utf-8"))


def _float(field: int, value: float) -> bytes:
    return _varint((field << 3) | 5) + struct.pack("<f", value)


def attribute(name: str, value: float | int | Sequence[int]) -> bytes:
    """An AttributeProto: a float, an int or a list of ints."""
    if isinstance(value, float):
        body = _str(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    elif isinstance(value, int):
        body = _str(1, name) + _int(3, value) + _int(20, _ATTR_INT)
    else:
        body = _str(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _ATTR_INTS)
    return body


def node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attributes: float | int | Sequence[int]) -> bytes:
    """A NodeProto of the standard operators."""
    body = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs) + _str(4, op_type)
    return body + b"".join(_bytes(5, attribute(k, v)) for k, v in attributes.items())


def tensor(name: str, array: np.ndarray) -> bytes:
    """A TensorProto holding ``array`` (float32 or int64) as little-endian raw data."""
    array = np.ascontiguousarray(array)
    data_type = _DTYPES[array.dtype]
    raw = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    return b"".join(_int(1, d) for d in array.shape) + _int(2, data_type) + _str(8, name) + _bytes(9, raw)


def external_tensor(name: str, dtype: np.dtype, shape: Sequence[int], location: str, offset: int) -> bytes:
    """A TensorProto whose data lies at ``offset`` in the external file ``location``."""
    length = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    entries = [("location", location), ("offset", str(offset)), ("length", str(length))]
    external = b"".join(_bytes(13, _str(1, k) + _str(2, v)) for k, v in entries)
    return b"".join(_int(1, d) for d in shape) + _int(2, _DTYPES[np.dtype(dtype)]) + _str(8, name) + external + _int(14, 1)


def value_info(name: str, elem_type: int, dims: Sequence[int | str]) -> bytes:
    """A ValueInfoProto for a tensor; a str dimension is symbolic (``batch``)."""
    shape = b"".join(_bytes(1, _str(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _str(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    nodes: Sequence[bytes],
    initializers: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    *,
    opset: int,
    ir_version: int,
    name: str,
) -> bytes:
    """A serialised ModelProto with one graph of the standard operators at ``opset``."""
    graph = (
        b"".join(_bytes(1, n) for n in nodes)
        + _str(2, name)
        + b"".join(_bytes(5, t) for t in initializers)
        + b"".join(_bytes(11, i) for i in inputs)
        + b"".join(_bytes(12, o) for o in outputs)
    )
    opset_import = _str(1, "") + _int(2, opset)
    return _int(1, ir_version) + _str(2, "mdrecall") + _bytes(7, graph) + _bytes(8, opset_import)


__all__ = ["FLOAT", "INT64", "attribute", "external_tensor", "model", "node", "tensor", "value_info"]
