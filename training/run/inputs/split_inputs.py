"""The images of a validation or test split as the trainer embeds them, again and again.

Each evaluation embeds the split's images under the eval transform. With frozen first stages
(``model.frozen_stages``), what those stages make of each image never changes: the activations are
made once (``FrozenPrefix``) and every later evaluation, of any epoch or of the reference model, runs
only the rest of the network on them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn

from retrieval.indexing.data.records import ImageRecord
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data.data_loaders import build_eval_loader
from retrieval.training.data.image_dataset import ImageRecordDataset
from retrieval.training.model.device import Precision
from retrieval.training.run.inputs.frozen_prefix import FrozenPrefix


class SplitInputs:
    """``embed(model)``: the split's embeddings (or any per-image output of ``model``) in record order."""

    def __init__(
        self,
        records: Sequence[ImageRecord],
        label_to_index: dict[str, int],
        cfg: TrainConfig,
        device: torch.device,
        precision: Precision,
        prefix: FrozenPrefix | None = None,
    ) -> None:
        self.loader = build_eval_loader(records, label_to_index, cfg, device)
        self.dataset: ImageRecordDataset = self.loader.dataset  # type: ignore[assignment]
        self.device, self.precision, self.prefix = device, precision, prefix
        self.channels_last = cfg.model.channels_last
        self.labels = np.asarray(self.dataset.labels)
        self._activations: list[torch.Tensor] | None = None

    @property
    def start_stage(self) -> int:
        return self.prefix.model.frozen_stages if self.prefix is not None else 0

    @torch.no_grad()
    def embed(self, model: nn.Module) -> np.ndarray:
        """float32 (N, D): ``model(inputs, start_stage)`` over the split, in eval mode (restored afterwards)."""
        was_training = model.training
        model.eval()
        chunks = []
        for inputs in self._inputs():
            inputs = inputs.to(self.device, non_blocking=True)
            if self.channels_last and inputs.ndim == 4:
                inputs = inputs.contiguous(memory_format=torch.channels_last)
            with torch.autocast(self.device.type, dtype=self.precision.dtype, enabled=self.precision.enabled):
                chunks.append(model(inputs, self.start_stage).float().cpu())
        model.train(was_training)
        return torch.cat(chunks).numpy()

    def _inputs(self) -> Iterator[torch.Tensor]:
        if self.prefix is None:
            yield from (images for images, _, _ in self.loader)
            return
        if self._activations is None:
            self._activations = [self.prefix(images).to("cpu", torch.float16) for images, _, _ in self.loader]
        yield from (chunk.float() for chunk in self._activations)
