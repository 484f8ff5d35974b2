"""N-pairs (Sohn, NeurIPS 2016) on unit vectors, with the temperature that makes it trainable.

Sohn's loss is a softmax over dot products of *unnormalised* embeddings (an L2 penalty keeps
their norms in check), so the logits can grow as training separates the classes. Our
embeddings are unit vectors: the dot products are cosines in [-1, 1], and even perfect
clusters (positives at cosine 1, negatives at cosine 0) keep a loss of log(1 + (N-1)/e) for N
pairs, so the gradient never fades. Dividing the cosines by a temperature, as NT-Xent and
normalized softmax do, gives the loss a reachable minimum. pml's ``NPairsLoss`` still picks
the pairs (per class the first image is the anchor, the second its positive); only its
similarity is replaced.
"""

from __future__ import annotations

import torch
from pytorch_metric_learning import losses as pml
from pytorch_metric_learning.distances import DotProductSimilarity
from pytorch_metric_learning.miners import BaseMiner

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses.pml_adapter import PmlPairLoss


class TemperatureDotProduct(DotProductSimilarity):
    """pml's dot-product similarity (of L2-normalised embeddings) divided by ``temperature``."""

    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.temperature = float(temperature)

    def compute_mat(self, query_emb: torch.Tensor, ref_emb: torch.Tensor) -> torch.Tensor:
        return super().compute_mat(query_emb, ref_emb) / self.temperature

    def pairwise_distance(self, query_emb: torch.Tensor, ref_emb: torch.Tensor) -> torch.Tensor:
        return super().pairwise_distance(query_emb, ref_emb) / self.temperature


def build_npairs(*, num_classes: int, embedding_dim: int, miner: BaseMiner | None, temperature: float) -> PmlPairLoss:
    if not temperature > 0:
        raise ConfigError(f"npairs temperature must be > 0, got {temperature}")
    return PmlPairLoss(pml.NPairsLoss(distance=TemperatureDotProduct(temperature)), miner)
