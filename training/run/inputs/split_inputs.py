"""The images of a validation or test split as the trainer embeds them, again and again.

Each evaluation embeds the split's images under the eval transform. With frozen first stages
(``model.frozen_stages``), what those stages make of each image never changes: the activations are
made once (``FrozenPrefix``) and every later evaluation, of any epoch or of the reference model, runs
only the rest of the network on them.

A model whose weights and structure are those of one embedded last (``MEMO_SIZE`` of them, by
``model_fingerprint``) is not run again: with ``--epochs 0`` the whitening stage's model is the
reference the run validated already, restored from its checkpoint, and its validation embeddings are
those of the reference pass; a whitened model whose unwhitened model the split embedded already gets
its embeddings through the whitening layer alone (the test's "pretrained + whitening" after "pretrained").
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from retrieval.indexing.data.records import ImageRecord
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.data_loaders import build_eval_loader
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset
from retrieval.training.model.device import Precision
from retrieval.training.model.embedding_model import EmbeddingModel, without_whitening
from retrieval.training.run.inputs.frozen_prefix import FrozenPrefix

MEMO_SIZE = 2  # models whose embeddings a split keeps: the reference and the latest, say


def model_fingerprint(model: nn.Module) -> str:
    """Equal for two models that compute the same function: the same modules (types, sizes, options)
    and bit-identical parameters and buffers, e.g. a model and its copy restored from a checkpoint."""
    structure = "\n".join(
        f"{name}:{type(module).__qualname__}({module.extra_repr()})" for name, module in model.named_modules()
    )
    digest = hashlib.blake2b(structure.encode(), digest_size=20)
    for name, tensor in model.state_dict().items():
        values = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{values.dtype}:{tuple(values.shape)}".encode())
        digest.update(values.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


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
        self._embedded: OrderedDict[str, np.ndarray] = OrderedDict()  # model_fingerprint -> embeddings

    @property
    def start_stage(self) -> int:
        return self.prefix.model.frozen_stages if self.prefix is not None else 0

    def embed(self, model: nn.Module) -> np.ndarray:
        """float32 (N, D): ``model(inputs, start_stage)`` over the split, in eval mode (restored afterwards); a
        model embedded already (``model_fingerprint``) is not run again: a copy of its embeddings comes back."""
        key = model_fingerprint(model)
        if key not in self._embedded:
            whitened = self._whitened(model)
            self._embedded[key] = self._run(model) if whitened is None else whitened
            while len(self._embedded) > MEMO_SIZE:
                self._embedded.popitem(last=False)
        self._embedded.move_to_end(key)
        return self._embedded[key].copy()

    @torch.no_grad()
    def _whitened(self, model: nn.Module) -> np.ndarray | None:
        """A whitened model's embeddings from those of the model it whitens, where this split has them: its
        whitening layer and L2 normalisation (``EmbeddingModel.forward``'s last step) on them."""
        if not isinstance(model, EmbeddingModel) or model.whitening is None:
            return None
        base = self._embedded.get(model_fingerprint(without_whitening(model)))
        if base is None:
            return None
        layer = model.whitening
        mapped = layer(torch.from_numpy(base).to(layer.weight.device, layer.weight.dtype))
        return F.normalize(mapped, p=2.0, dim=1).float().cpu().numpy()

    @torch.no_grad()
    def _run(self, model: nn.Module) -> np.ndarray:
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
