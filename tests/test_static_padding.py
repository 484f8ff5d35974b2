"""TF-"same" convolutions exported with constant pads: same numbers, and onnxruntime folds the pads away."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

from retrieval.training.export.onnx_export import onnx_export_bytes
from retrieval.training.model.trunks.static_padding import StaticSamePadConv, with_static_same_padding

conv2d_same = pytest.importorskip("timm.layers.conv2d_same")


def same_padded_net() -> nn.Module:
    """Stride-2 3x3 and depthwise 5x5 TF-"same" convolutions: asymmetric pads on odd and even sizes."""
    torch.manual_seed(0)
    return nn.Sequential(
        conv2d_same.Conv2dSame(3, 8, 3, stride=2),
        nn.ReLU6(),
        conv2d_same.Conv2dSame(8, 8, 5, stride=2, groups=8),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    ).eval()


@pytest.mark.parametrize("size", [33, 32])
def test_static_copy_computes_the_same(size: int) -> None:
    model = same_padded_net()
    static = with_static_same_padding(model, size)
    assert sum(isinstance(m, StaticSamePadConv) for m in static.modules()) == 2
    assert not any(isinstance(m, StaticSamePadConv) for m in model.modules())  # the original is untouched
    images = torch.randn(3, 3, size, size, generator=torch.Generator().manual_seed(size))
    with torch.no_grad():
        assert torch.equal(static(images), model(images))


def test_models_without_same_convs_are_returned_as_is() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1)).eval()
    assert with_static_same_padding(model, 16) is model


def test_export_has_constant_pads_that_onnxruntime_fuses(tmp_path: Path) -> None:
    model = same_padded_net()
    onnx_bytes = onnx_export_bytes(model, 33)
    assert "Shape" not in {node.op_type for node in onnx.load_from_string(onnx_bytes).graph.node}
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC  # portable rewrites only
    session = ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    optimized = {node.op_type for node in onnx.load(str(tmp_path / "optimized.onnx")).graph.node}
    assert "Pad" not in optimized and "Conv" in optimized  # folded into the convolutions' own pads
    images = torch.randn(2, 3, 33, 33, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(images).numpy()
    np.testing.assert_allclose(session.run(None, {"images": images.numpy()})[0], expected, atol=1e-5)
