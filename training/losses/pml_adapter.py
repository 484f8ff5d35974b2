"""Wrap a pytorch-metric-learning loss (and optional miner) as an ``EmbeddingLoss``.

Two adapters because the family decides the sampler and the all-gather: pair/triplet
losses learn from the relations inside a batch (class-balanced batches, gathered across
ranks); proxy/classification losses compare each sample with learned class vectors
(plain shuffling, no gather). The pml loss is the ``loss`` sub-module, so its proxies
appear in ``state_dict()`` as ``loss.proxies`` / ``loss.W`` / ``loss.fc``.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from pytorch_metric_learning.losses import BaseMetricLossFunction
from pytorch_metric_learning.miners import BaseMiner

from retrieval.training.losses.base import EmbeddingLoss, Sampler


class _PmlLoss(EmbeddingLoss):
    def __init__(
        self, loss: BaseMetricLossFunction, miner: BaseMiner | None = None, num_classes: int | None = None
    ) -> None:
        super().__init__(num_classes=num_classes)
        self.loss = loss
        self.miner = miner

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        indices = self.miner(embeddings, labels) if self.miner is not None else None
        return self.loss(embeddings, labels, indices)


class PmlPairLoss(_PmlLoss):
    """A pml pair/triplet loss: class-balanced C x M batches."""

    sampler: ClassVar[Sampler] = "balanced"


class PmlProxyLoss(_PmlLoss):
    """A pml proxy/classification loss: shuffled batches; its proxies are loss parameters."""

    sampler: ClassVar[Sampler] = "shuffle"
