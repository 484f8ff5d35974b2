"""The one interface every deep-metric-learning loss implements: ``EmbeddingLoss``.

The trainer only sees this class. It reads ``sampler`` to pick the batch sampler, gives
``loss_parameters()`` their own optimizer group, and saves ``state_dict()`` in checkpoints.
Under torchrun every rank computes the loss on the whole global batch (``training.distributed``),
so a loss never needs to know how many processes there are.

Losses compute in fp32 even under ``torch.autocast``: the template ``forward`` turns
autocast off and casts the embeddings once, then calls ``compute``. This matters most
for proxy/softmax heads (a bf16 softmax over thousands of classes at temperature 0.05
loses the signal), and it also keeps pytorch-metric-learning from casting a learnable
proxy tensor to bf16 in place (its ``cast_types`` does ``W.data = W.data.to(dtype)``),
which would corrupt the optimizer state.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch

from retrieval.indexing.common.errors import DataError

Sampler = Literal["balanced", "shuffle"]


class EmbeddingLoss(torch.nn.Module):
    """A DML loss: forward(embeddings (B, D) float, labels (B,) int64) -> scalar loss.

    Embeddings arrive already L2-normalised by the model (unit norm). Subclasses implement
    ``compute``; they may own parameters (proxies, class weights, a classifier head) and
    always see the whole batch, so losses that need both class logits and the batch
    similarity matrix (Group Loss) fit the same interface.
    """

    sampler: ClassVar[Sampler]

    def __init__(self, num_classes: int | None = None) -> None:
        super().__init__()
        # Only losses that index per-class tensors need it; it bounds the label check.
        self.num_classes = num_classes

    def loss_parameters(self) -> list[torch.nn.Parameter]:
        """Proxies / class weights (may be empty): the trainer gives them their own lr."""
        return [p for p in self.parameters() if p.requires_grad]

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        labels = self._checked_labels(embeddings, labels)
        with torch.autocast(device_type=embeddings.device.type, enabled=False):
            return self.compute(embeddings.float(), labels)

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss on fp32 embeddings (B, D) and int64 labels (B,); returns a scalar."""
        raise NotImplementedError

    def _checked_labels(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if embeddings.ndim != 2 or not embeddings.is_floating_point():
            shape = tuple(embeddings.shape)
            raise ValueError(f"embeddings must be a float (B, D) tensor, got {embeddings.dtype} {shape}")
        if labels.ndim != 1 or labels.shape[0] != embeddings.shape[0]:
            raise ValueError(
                f"labels must be a (B,) tensor matching embeddings {tuple(embeddings.shape)}, got {tuple(labels.shape)}"
            )
        if labels.is_floating_point() or labels.dtype == torch.bool:
            raise ValueError(f"labels must be an integer tensor, got {labels.dtype}")
        labels = labels.long()
        if self.num_classes is not None and labels.numel() > 0:
            low, high = int(labels.min()), int(labels.max())
            if low < 0 or high >= self.num_classes:
                bad = low if low < 0 else high
                raise DataError(
                    f"label {bad} is outside [0, {self.num_classes}): the loss was built for "
                    f"{self.num_classes} classes; build it with the number of training classes "
                    "(did the training classes change since the checkpoint?)"
                )
        return labels
