"""``transpose_into``: onnxruntime's Transpose writes exactly ``matrix.T`` into the given buffer, and the
embedded model is what ``onnx.helper`` builds."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.indexing.search.fast_transpose import TRANSPOSE_ONNX, transpose_into


def test_the_embedded_model_is_the_one_onnx_builds() -> None:
    onnx = pytest.importorskip("onnx")
    helper, tensor = onnx.helper, onnx.TensorProto
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["matrix"], ["transposed"], perm=[1, 0])],
        "transpose",
        [helper.make_tensor_value_info("matrix", tensor.FLOAT, ["rows", "columns"])],
        [helper.make_tensor_value_info("transposed", tensor.FLOAT, ["columns", "rows"])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8, producer_name="retrieval"
    )
    onnx.checker.check_model(model)
    assert model.SerializeToString() == TRANSPOSE_ONNX


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (3, 5), (257, 1031), (2560, 320)])
def test_writes_the_exact_transpose_into_the_buffer(shape: tuple[int, int]) -> None:
    matrix = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    matrix[0, -1] = -np.inf  # same-set search writes -inf on the diagonal
    buffer = np.full(shape[0] * shape[1] + 5, 7.0, dtype=np.float32)
    out = buffer[: matrix.size].reshape(shape[::-1])
    assert transpose_into(matrix, out) is out
    np.testing.assert_array_equal(out, matrix.T)
    assert (buffer[matrix.size :] == 7.0).all()  # nothing written past the view


def test_refuses_what_it_cannot_write_in_place() -> None:
    matrix = np.zeros((3, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="float32"):
        transpose_into(matrix, np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="contiguous"):
        transpose_into(matrix, np.zeros((8, 3), dtype=np.float32)[::2])
    assert transpose_into(np.zeros((0, 4), dtype=np.float32), np.zeros((4, 0), dtype=np.float32)).shape == (4, 0)
