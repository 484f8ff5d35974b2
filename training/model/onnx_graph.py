"""A torch module as ONNX bytes: the one place ``torch.onnx.export`` is called.

The TorchScript exporter (``dynamo=False``, opset 17: the dynamo exporter needs onnxscript) traces
the module in eval mode into memory, with a dynamic batch axis and TF-"same" paddings fixed for the
input size (``static_padding``). Used for the exported embedder (``export.onnx_export``), the text
tower beside it (``export.text_export``) and for the frozen first stages that training runs in onnxruntime (``run.frozen_prefix``).
"""

from __future__ import annotations

import io
import warnings

import torch
from torch import nn

from retrieval.training.model.trunks.static_padding import with_static_same_padding

OPSET = 17


def onnx_bytes(
    module: nn.Module,
    input_shape: tuple[int, ...],
    *,
    input_name: str,
    output_name: str,
    dtype: torch.dtype = torch.float32,
    example: torch.Tensor | None = None,
) -> bytes:
    """``module`` (eval mode) serialised to ONNX for inputs of ``input_shape`` and ``dtype`` (its batch axis
    dynamic): images, or a text tower's token ids (int64). The trace runs on ``example`` (default zeros), for a
    module whose work depends on the values (the text tower runs the positions up to the end token)."""
    module = with_static_same_padding(module.eval(), input_shape[-1])
    dummy = torch.zeros(*input_shape, dtype=dtype) if example is None else example
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            module,
            (dummy,),
            buffer,  # type: ignore[arg-type]  # the exporter writes to any binary file object
            dynamo=False,
            opset_version=OPSET,
            input_names=[input_name],
            output_names=[output_name],
            dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}},
        )
    return buffer.getvalue()
