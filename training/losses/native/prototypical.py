"""Prototypical loss (Snell et al., NeurIPS 2017), one episode per class-balanced batch.

Each class's images in the batch are split in batch order: the first half (rounded down, at
least one) is the support set, the rest are queries. A class's prototype is the mean of its
support embeddings; each query gets a softmax over -||q - prototype_k||^2 / temperature across
the classes of the batch, and the loss is the mean cross-entropy over all queries. Classes with
fewer than two images in the batch have no query and are left out (neither prototype nor query).

Snell et al. use plain squared Euclidean distances (temperature 1) on unnormalised embeddings.
Ours are unit vectors, so the distances lie in [0, 4] and the logits cannot grow past that range:
the loss keeps pushing even on perfect clusters (as N-pairs does, see docs/losses.md); a lower
``temperature`` sharpens it.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses.base import EmbeddingLoss, Sampler


def support_mask(labels: torch.Tensor) -> torch.Tensor:
    """True for the support images: the first floor(n/2) images of each class of n (batch order)."""
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    rank_in_class = torch.tril(same, diagonal=-1).sum(dim=1)
    class_size = same.sum(dim=1)
    return rank_in_class < class_size // 2


class PrototypicalLoss(EmbeddingLoss):
    """Mean over the queries of -log softmax(-squared distance to the class prototypes / T)."""

    sampler: ClassVar[Sampler] = "balanced"

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        if not temperature > 0:
            raise ConfigError(f"prototypical temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        support = support_mask(labels)
        classes, support_class = torch.unique(labels[support], return_inverse=True)
        query = ~support & torch.isin(labels, classes)
        if not query.any():
            return embeddings.sum() * 0  # no class with two images: nothing to learn, keep the graph
        prototypes = torch.zeros(len(classes), embeddings.shape[1], dtype=embeddings.dtype, device=embeddings.device)
        prototypes = prototypes.index_add(0, support_class, embeddings[support])
        prototypes = prototypes / torch.bincount(support_class, minlength=len(classes)).unsqueeze(1)
        squared = (embeddings[query].unsqueeze(1) - prototypes.unsqueeze(0)).pow(2).sum(dim=2)
        logits = -squared / self.temperature
        targets = torch.searchsorted(classes, labels[query])
        return F.cross_entropy(logits, targets)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}"
