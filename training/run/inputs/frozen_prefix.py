"""The frozen first stages of the trunk, run as fast as the device allows (``model.frozen_stages``).

Frozen stages are fixed functions of the image: no gradient flows into them and their BatchNorm
layers use running statistics. On a GPU they run in torch's inference mode. On the CPU they run
in onnxruntime: the early stages of EfficientNet-style trunks work at high resolution, where torch
pays for unfused BatchNorm and for copying every TF-"same" padding, and onnxruntime runs the same
stages 2-4x faster (docs/results.md, "CPU training throughput"). The ONNX graph is the prefix of
the model itself (``model.onnx_graph``), exported once per input size; its output equals torch's to
float rounding (tests/test_frozen_prefix.py).

onnxruntime's threads sleep between runs (``allow_spinning`` 0): spinning, they would take the
cores the training step needs next.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.model.onnx_graph import onnx_bytes


class _Prefix(nn.Module):
    def __init__(self, model: EmbeddingModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model.prefix(images)


class FrozenPrefix:
    """``prefix(images) -> activations`` of ``model``'s frozen stages, on ``device``'s fastest engine."""

    def __init__(self, model: EmbeddingModel, device: torch.device) -> None:
        if not model.frozen_stages:
            raise ValueError("FrozenPrefix needs a model with frozen_stages > 0")
        self.model, self.device = model, device
        self._sessions: dict[tuple[int, int], object] = {}

    @property
    def uses_onnxruntime(self) -> bool:
        return self.device.type == "cpu"

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """Activations (B, C, h, w) float32 on ``device`` of normalised images (B, 3, H, W)."""
        if not self.uses_onnxruntime:
            with torch.inference_mode():
                return self.model.prefix(images.to(self.device, non_blocking=True)).clone()
        session = self._session((int(images.shape[-2]), int(images.shape[-1])))
        batch = np.ascontiguousarray(images.detach().cpu().numpy(), dtype=np.float32)
        return torch.from_numpy(session.run(None, {"images": batch})[0])  # type: ignore[attr-defined]

    def _session(self, size: tuple[int, int]) -> object:
        if size not in self._sessions:
            import onnxruntime as ort  # the cpu/gpu extra; only CPU training with frozen stages needs it here

            frozen = _Prefix(copy.deepcopy(self.model))  # exporting sets eval mode; the training model keeps its own
            graph = onnx_bytes(frozen, (2, 3, *size), input_name="images", output_name="activations")
            options = ort.SessionOptions()
            options.intra_op_num_threads = torch.get_num_threads()
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._sessions[size] = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        return self._sessions[size]
