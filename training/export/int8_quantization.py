"""Static INT8 quantization of an exported float ONNX model with onnxruntime's quantization tools.

What is quantized, and why (measured on EfficientNet-Lite0 at 224 px on this 2-core AVX-512 VNNI CPU,
``bench/bench_int8.py``, docs/training.md):

- QDQ format (QuantizeLinear/DequantizeLinear pairs that onnxruntime fuses into QLinearConv at load
  time); QOperator ran at the same speed, and QDQ is the format other execution providers read.
- uint8 activations (asymmetric, per tensor) with int8 weights (symmetric, per output channel): the
  u8s8 kernels onnxruntime uses with VNNI. int8 activations (s8s8) ran at fp32 speed here.
- Weights in 7 bits (``reduce_range``): without VNNI (AVX2, or AVX-512 without VNNI) onnxruntime sums
  pairs of u8 x s8 products in 16 bits, which saturate with 8-bit weights (a model checked on a VNNI
  CPU lost 4.4 points of MAP@R on an AVX2 one); 255 x 64 x 2 fits, so every x86 kind computes the same
  sums (``indexing.model.cpu_kind``, docs/results.md "INT8 on every CPU").
- Ranges from MinMax calibration over the given images (the calibrator keeps only per-batch minima and
  maxima, so memory does not grow with their number), after ``quant_pre_process`` (shape
  inference, constant folding, zero Pads folded into convolutions). Percentile calibration and
  64 to 512 images all gave the same validation MAP@R within 0.05 points on Caltech-101.
- Only the convolutional trunk (``QUANTIZED_OPS``: convolutions with their residual Adds and
  ReLU6/ReLU, which fuse into them), the first convolution included. Left in float, the first
  convolution ran in onnxruntime's blocked float layout, and converting its output back to NCHW,
  then NHWC, then uint8 for the trunk cost more than the convolution itself (profile, batch 32:
  11 ms convolution + 14.5 ms of conversions vs 7 ms as QLinearConv; the model 2.2-2.3x fp32
  instead of 1.9-2.15x, bench/bench_int8.py). Its uint8 input loses little: the normalised pixels' MinMax range over 256 levels is
  about the step of the 8-bit pixels they came from. The head (pooling, LayerNorm, linear layer, L2
  normalisation) stays float: quantizing every operator took the mean cosine to the fp32 embeddings
  from 0.99 to 0.91, for a small share of the time.
- A vision transformer's trunk (a graph with attention: ``Softmax`` nodes) is a stack of matrix products,
  which the static convolutional path leaves in float: its INT8 file ran at 0.74-0.85x fp32. Its trunk's
  ``MatMul``/``Gemm`` are quantized dynamically instead (``quantize_dynamic``: int8 weights per output
  channel in 7 bits as above, uint8 activations whose range each batch computes at run time, so nothing is
  calibrated), the head again left in float: 1.74-1.80x fp32 for a ViT-S/14 at 224 px, batch 32, here.
  The export's validation check (``int8_export.retrieval_check``) guards its quality as for the CNNs.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process

QUANTIZED_OPS = ("Conv", "Add", "Clip", "Relu", "MaxPool")
TRANSFORMER_OPS = ("MatMul", "Gemm")  # a transformer trunk's matrix products, quantized dynamically
TRUNK_PREFIX = "/backbone/"  # the exported node names of EmbeddingModel.backbone (the head's are not)
FORMAT: Literal["QDQ", "QOperator"] = "QDQ"
REDUCE_RANGE = True
WEIGHTS = "int8 per output channel, symmetric, 7-bit range (reduce_range)"
STATIC_ACTIVATIONS = "uint8 per tensor, asymmetric"
DYNAMIC_ACTIVATIONS = "uint8 per tensor, asymmetric, range computed per batch at run time (dynamic)"


@dataclass(frozen=True)
class QuantizedModel:
    onnx_bytes: bytes
    calibration_images: int
    float_nodes: list[str] = field(default_factory=list)  # kept in float on purpose, for model.json
    format: Literal["QDQ", "QOperator"] = FORMAT
    activations: str = STATIC_ACTIVATIONS
    calibration_method: str = "MinMax"


def quantize_int8(float_bytes: bytes, input_name: str, batches: Iterable[np.ndarray]) -> QuantizedModel:
    """INT8 model of ``float_bytes`` calibrated on ``batches`` (preprocessed (n, 3, crop, crop) float32);
    a transformer's is quantized dynamically and reads none of them."""
    if is_transformer(onnx.load_from_string(float_bytes)):
        return _quantize_transformer(float_bytes)
    reader = _BatchReader(input_name, iter(batches))
    with tempfile.TemporaryDirectory(prefix="retrieval-int8-") as tmp, _quiet_quantizer():
        source, prepared, output = (Path(tmp) / name for name in ("float.onnx", "prepared.onnx", "int8.onnx"))
        source.write_bytes(float_bytes)
        quant_pre_process(str(source), str(prepared))
        quantize_static(
            str(prepared),
            str(output),
            reader,
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=list(QUANTIZED_OPS),
            per_channel=True,
            reduce_range=REDUCE_RANGE,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )
        quantized = output.read_bytes()
    kept = [f"operators other than {', '.join(QUANTIZED_OPS)} (the head)"]
    return QuantizedModel(quantized, reader.images, kept)


def _quantize_transformer(float_bytes: bytes) -> QuantizedModel:
    """The trunk's matrix products in INT8 with run-time activation ranges; the head stays float."""
    with tempfile.TemporaryDirectory(prefix="retrieval-int8-") as tmp, _quiet_quantizer():
        source, prepared, output = (Path(tmp) / name for name in ("float.onnx", "prepared.onnx", "int8.onnx"))
        source.write_bytes(float_bytes)
        quant_pre_process(str(source), str(prepared))  # renames nodes (a Gemm becomes Gemm_MatMul + Add)
        nodes = onnx.load(str(prepared)).graph.node
        head = [n.name for n in nodes if n.op_type in TRANSFORMER_OPS and not n.name.startswith(TRUNK_PREFIX)]
        head += [f"{name}_MatMul" for name in head]  # quantize_dynamic turns a Gemm into NAME_MatMul + Add first
        quantize_dynamic(
            str(prepared),
            str(output),
            op_types_to_quantize=list(TRANSFORMER_OPS),
            nodes_to_exclude=head,
            per_channel=True,
            reduce_range=REDUCE_RANGE,
            weight_type=QuantType.QInt8,
        )
        quantized = output.read_bytes()
    kept = [f"operators other than the trunk's {', '.join(TRANSFORMER_OPS)} (the head)"]
    return QuantizedModel(
        quantized,
        0,
        kept,
        format="QOperator",
        activations=DYNAMIC_ACTIVATIONS,
        calibration_method="none (dynamic)",
    )


def is_transformer(model: onnx.ModelProto) -> bool:
    """True for a graph with attention (``Softmax`` nodes): a vision transformer's trunk."""
    return any(node.op_type == "Softmax" for node in model.graph.node)


def is_quantized(model: onnx.ModelProto) -> bool:
    """True when the graph computes in 8 bits: quantize nodes and int8/uint8 weights."""
    ops = {node.op_type for node in model.graph.node}
    eight_bit = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
    has_int_weights = any(init.data_type in eight_bit for init in model.graph.initializer)
    quantizing = {"QuantizeLinear", "QLinearConv", "DynamicQuantizeLinear", "MatMulInteger"}
    return bool(ops & quantizing) and has_int_weights


class _BatchReader(CalibrationDataReader):
    """onnxruntime's calibration input: an iterator of image batches, counted."""

    def __init__(self, input_name: str, batches: Iterator[np.ndarray]) -> None:
        super().__init__()
        self.input_name = input_name
        self.batches = batches
        self.images = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self.batches, None)
        if batch is None:
            return None
        self.images += len(batch)
        return {self.input_name: np.ascontiguousarray(batch, dtype=np.float32)}


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """Silence the quantizer's logging warnings (e.g. about the tensors it leaves in float) while it runs."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
