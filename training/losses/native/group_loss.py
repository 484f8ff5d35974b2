"""Group Loss (Elezi et al., ECCV 2020): label propagation over the batch, then cross-entropy.

1. W: Pearson correlations between the batch embeddings, negative values clamped to 0 (the
   paper's appendix G: shifting instead cost 13 points of R@1 on CUB) and a zero diagonal (eq. 1).
2. X(0): priors from a classifier head, softmax(logits / temperature); the first ``num_anchors``
   images of each class in the batch are anchors and get their one-hot label instead.
3. T iterations of replicator dynamics, x_i <- x_i * (W x)_i / (x_i . (W x)_i) (eq. 4): similar
   images pull each other towards a shared label. One-hot rows stay one-hot.
4. The loss: cross-entropy of the refined X(T) against the labels, averaged over the batch
   (anchors contribute 0), plus ``ce_weight`` times the head's own cross-entropy.

Everything is differentiable, so the gradient reaches the embeddings through W and through the
priors. The head is a loss parameter (its own learning rate, saved in checkpoints). Defaults
are the authors' code for CUB-200 (dvl-tum/group_loss ``train.py``): temperature 24, 2 anchors per
class, 1 iteration, head cross-entropy weight 1; the paper leaves them to a random search.
Two differences from that code: the head and W see our L2-normalised embeddings rather than the
raw pooled features (Pearson correlation is scale-invariant, so W is unchanged, but the logits
are bounded by the head's weight norms), and W's diagonal is 0 as the paper writes, where the
code leaves it at 1.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses.base import EmbeddingLoss, Sampler

LOG_FLOOR = 1e-12  # probabilities below this are clamped before the log (the authors add 1e-12)


def pearson_similarity(embeddings: torch.Tensor) -> torch.Tensor:
    """(B, B) Pearson correlations of the rows, negatives set to 0 and the diagonal to 0."""
    centred = embeddings - embeddings.mean(dim=1, keepdim=True)
    unit = centred / centred.norm(dim=1, keepdim=True).clamp_min(1e-12)
    similarity = F.relu(unit @ unit.T)
    return similarity * (1 - torch.eye(len(similarity), device=similarity.device, dtype=similarity.dtype))


def replicator_step(similarity: torch.Tensor, assignments: torch.Tensor) -> torch.Tensor:
    """One step of eq. 4: x_il <- x_il * pi_il / sum_m x_im * pi_im with pi = W X.

    A row with no support at all (every similarity 0, or its classes unsupported) is left as it is
    rather than divided by zero.
    """
    weighted = assignments * (similarity @ assignments)
    total = weighted.sum(dim=1, keepdim=True)
    return torch.where(total > 0, weighted / total.clamp_min(torch.finfo(total.dtype).tiny), assignments)


def anchor_mask(labels: torch.Tensor, num_anchors: int) -> torch.Tensor:
    """True for the first ``num_anchors`` images of each class, in batch order (as the authors' code)."""
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    earlier_of_same_class = torch.tril(same, diagonal=-1).sum(dim=1)
    return earlier_of_same_class < num_anchors


def initial_assignments(priors: torch.Tensor, labels: torch.Tensor, num_anchors: int) -> torch.Tensor:
    """X(0): the priors, with the anchors' rows replaced by their one-hot labels."""
    one_hot = F.one_hot(labels, priors.shape[1]).to(priors.dtype)
    return torch.where(anchor_mask(labels, num_anchors).unsqueeze(1), one_hot, priors)


class GroupLoss(EmbeddingLoss):
    """Cross-entropy of replicator-refined class assignments, plus the head's cross-entropy."""

    sampler: ClassVar[Sampler] = "balanced"

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        temperature: float = 24.0,
        num_anchors: int = 2,
        iterations: int = 1,
        ce_weight: float = 1.0,
    ) -> None:
        super().__init__(num_classes=num_classes)
        _check(temperature > 0, f"group_loss temperature must be > 0, got {temperature}")
        _check(
            int(num_anchors) == num_anchors >= 0, f"group_loss num_anchors must be an integer >= 0, got {num_anchors}"
        )
        _check(int(iterations) == iterations >= 1, f"group_loss iterations must be an integer >= 1, got {iterations}")
        _check(ce_weight >= 0, f"group_loss ce_weight must be >= 0, got {ce_weight}")
        self.temperature = float(temperature)
        self.num_anchors = int(num_anchors)
        self.iterations = int(iterations)
        self.ce_weight = float(ce_weight)
        self.head = torch.nn.Linear(embedding_dim, num_classes)

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self.head(embeddings)
        assignments = self.refined_assignments(embeddings, logits, labels)
        picked = assignments.gather(1, labels.unsqueeze(1)).squeeze(1)
        group = -picked.clamp_min(LOG_FLOOR).log().mean()
        if self.ce_weight == 0:
            return group
        return group + self.ce_weight * F.cross_entropy(logits, labels)

    def refined_assignments(self, embeddings: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """X(T): the anchored priors after ``iterations`` replicator steps over the batch similarity."""
        similarity = pearson_similarity(embeddings)
        priors = F.softmax(logits / self.temperature, dim=1)
        assignments = initial_assignments(priors, labels, self.num_anchors)
        for _ in range(self.iterations):
            assignments = replicator_step(similarity, assignments)
        return assignments

    def extra_repr(self) -> str:
        return (
            f"num_classes={self.num_classes}, temperature={self.temperature}, num_anchors={self.num_anchors}, "
            f"iterations={self.iterations}, ce_weight={self.ce_weight}"
        )


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)
