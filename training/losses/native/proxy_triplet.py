"""Proxy-triplet loss (Movshovitz-Attias et al., ICCV 2017): triplets of a sample and two proxies.

One learned proxy per class replaces the positive and negative images of a triplet: for each
sample x of class y, relu(d(x, p_y) - d(x, p_n) + margin) with p_n the nearest proxy of another
class (the hardest negative proxy), d the Euclidean distance between unit vectors (the proxies
are L2-normalised when used), averaged over the batch. The Unbiased Evaluation (Fehervari et al.)
compares it with the NCA form (``proxy_nca``), which it found better.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses.base import EmbeddingLoss, Sampler


class ProxyTripletLoss(EmbeddingLoss):
    """Mean over the batch of relu(d(x, own proxy) - d(x, nearest other proxy) + margin)."""

    sampler: ClassVar[Sampler] = "shuffle"

    def __init__(self, num_classes: int, embedding_dim: int, margin: float = 0.1) -> None:
        super().__init__(num_classes=num_classes)
        if num_classes < 2:
            raise ConfigError(f"proxy_triplet needs at least 2 classes (a negative proxy), got {num_classes}")
        if margin < 0:
            raise ConfigError(f"proxy_triplet margin must be >= 0, got {margin}")
        self.margin = float(margin)
        self.proxies = torch.nn.Parameter(torch.randn(num_classes, embedding_dim))

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        distances = torch.cdist(embeddings, F.normalize(self.proxies, dim=1))
        positive = distances.gather(1, labels.unsqueeze(1)).squeeze(1)
        own_class = F.one_hot(labels, distances.shape[1]).bool()
        hardest_negative = distances.masked_fill(own_class, float("inf")).min(dim=1).values
        return F.relu(positive - hardest_negative + self.margin).mean()

    def extra_repr(self) -> str:
        return f"num_classes={self.num_classes}, margin={self.margin}"
