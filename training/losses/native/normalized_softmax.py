"""Normalized softmax (Zhai & Wu, BMVC 2019) with class subsampling.

Cross-entropy over cos(x, w_c) / T with no bias and L2-normalised class weights, so the
weights are class proxies. With ``class_ratio < 1`` each training batch scores only the
classes present in the batch plus ``ceil(class_ratio * other_classes)`` randomly chosen
other classes (the paper's subsampling module, which makes >10k-class training cheap).
In eval mode all classes are scored. The LayerNorm of the paper belongs to the model.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses.base import EmbeddingLoss, Sampler


class NormalizedSoftmaxLoss(EmbeddingLoss):
    """Mean over the batch of -log softmax(cos(x_i, w) / temperature)[y_i]."""

    sampler: ClassVar[Sampler] = "shuffle"

    def __init__(
        self, num_classes: int, embedding_dim: int, temperature: float = 0.05, class_ratio: float = 1.0
    ) -> None:
        super().__init__(num_classes=num_classes)
        if not temperature > 0:
            raise ConfigError(f"normalized_softmax temperature must be > 0, got {temperature}")
        if not 0 < class_ratio <= 1:
            raise ConfigError(f"normalized_softmax class_ratio must be in (0, 1], got {class_ratio}")
        self.temperature = float(temperature)
        self.class_ratio = float(class_ratio)
        # (num_classes, D) like nn.Linear; normal init gives uniformly random directions.
        self.weight = torch.nn.Parameter(torch.randn(num_classes, embedding_dim))

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if not self._subsampling():
            return F.cross_entropy(self.logits(embeddings), labels)
        classes = self.scored_classes(labels)
        # the sorted batch classes come first, so a label's logit column is its rank among them
        targets = torch.searchsorted(torch.unique(labels), labels)
        return F.cross_entropy(self.logits(embeddings, classes), targets)

    def logits(self, embeddings: torch.Tensor, classes: torch.Tensor | None = None) -> torch.Tensor:
        """cos(x, w_c) / T for the given class ids (all classes when None)."""
        weight = self.weight if classes is None else self.weight[classes]
        return F.normalize(embeddings, dim=1) @ F.normalize(weight, dim=1).T / self.temperature

    def scored_classes(self, labels: torch.Tensor) -> torch.Tensor:
        """Class ids whose logits a batch uses: the sorted batch classes, then the others kept."""
        batch_classes = torch.unique(labels)
        return torch.cat([batch_classes, self._other_classes(batch_classes)])

    def _other_classes(self, batch_classes: torch.Tensor) -> torch.Tensor:
        others = _complement(batch_classes, self.weight.shape[0])
        if not self._subsampling():
            return others
        keep = math.ceil(self.class_ratio * others.numel())
        return others[torch.randperm(others.numel(), device=others.device)[:keep]]

    def _subsampling(self) -> bool:
        return self.training and self.class_ratio < 1.0

    def extra_repr(self) -> str:
        return f"num_classes={self.num_classes}, temperature={self.temperature}, class_ratio={self.class_ratio}"


def _complement(classes: torch.Tensor, num_classes: int) -> torch.Tensor:
    """The class ids in [0, num_classes) that are not in ``classes``."""
    mask = torch.ones(num_classes, dtype=torch.bool, device=classes.device)
    mask[classes] = False
    return torch.nonzero(mask).squeeze(1)
