"""``matrix.T`` copied into a given buffer by onnxruntime's Transpose kernel (SIMD, cache-blocked,
multi-threaded): what same-set k-NN needs to feed one similarity block to the heaps of both sides.

NumPy copies a transposed view with strided reads or writes that miss the cache: 15-16 ms for a
2560 x 2560 float32 block here, copied in slabs of rows or in square tiles of any size; onnxruntime's
kernel took 2.7-5.3 ms. At N=60,000 d=512 a same-set search transposes 276 such blocks, and the
whole evaluation ran 13.6-13.7 s instead of 17.0-17.3 s (two alternating runs each, docs/metrics.md).

The model is 159 bytes of ONNX, kept here as a constant so that ``retrieval.indexing`` needs only
onnxruntime, not the ``onnx`` package (tests/test_fast_transpose.py rebuilds it with ``onnx.helper``
and checks the bytes).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

TRANSPOSE_ONNX = bytes.fromhex(
    "0808120972657472696576616c3a89010a2e0a066d6174726978120a7472616e73706f73656422095472616e73706f"
    "73652a0d0a047065726d40014000a0010712097472616e73706f73655a230a066d617472697812190a1708011213"
    "0a061204726f77730a091207636f6c756d6e7362270a0a7472616e73706f73656412190a17080112130a09120763"
    "6f6c756d6e730a061204726f777342040a00100d"
)
"""ONNX (IR 8, opset 13): float ``transposed[columns, rows] = Transpose(matrix[rows, columns], perm=[1, 0])``."""


@lru_cache(maxsize=1)
def _session() -> Any:
    import onnxruntime as ort  # loaded on first use: evaluation needs it, searching an index does not

    options = ort.SessionOptions()
    options.inter_op_num_threads = 1
    # idle threads sleep: the matrix product and faiss's heap pass that follow need the cores
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(TRANSPOSE_ONNX, options, providers=["CPUExecutionProvider"])


def transpose_into(matrix: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Write ``matrix.T`` into ``out`` (both C-contiguous float32, ``out.shape == matrix.shape[::-1]``)."""
    if matrix.dtype != np.float32 or out.dtype != np.float32 or out.shape != matrix.shape[::-1]:
        raise ValueError(f"transpose_into needs float32 {matrix.shape} -> {matrix.shape[::-1]}, got {out.shape}")
    if not (matrix.flags.c_contiguous and out.flags.c_contiguous):
        raise ValueError("transpose_into needs C-contiguous arrays")
    if matrix.size == 0:
        return out
    session = _session()
    binding = session.io_binding()
    binding.bind_cpu_input("matrix", matrix)
    binding.bind_output("transposed", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
    session.run_with_iobinding(binding)
    return out
