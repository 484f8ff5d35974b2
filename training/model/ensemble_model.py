"""An ensemble's embedding: the members' L2-normalised embeddings concatenated and normalised again.

With L members of dimension d the result has L x d dimensions, and its inner product is the mean
of the members' cosine similarities (each member contributes 1/L), as in DREML (Xuan et al., ECCV
2018) and the Group Loss ensembles (Elezi et al., ECCV 2020). The sign bits of the joined vector
are the members' sign bits side by side, so the binary index has L x d bits. ``join_embeddings``
does it for arrays (evaluation during training), ``EnsembleModel`` inside the exported graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from retrieval.training.model.embedding_model import EmbeddingModel


def join_embeddings(members: Sequence[np.ndarray]) -> np.ndarray:
    """(N, d_i) arrays, one per member -> (N, sum d_i) float32 unit rows."""
    normalised = [m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12) for m in members]
    joined = np.concatenate(normalised, axis=1).astype(np.float32)
    return joined / np.maximum(np.linalg.norm(joined, axis=1, keepdims=True), 1e-12)


class EnsembleModel(nn.Module):
    """images (B, 3, H, W) -> the members' joined unit-norm embeddings (B, sum of member dims)."""

    def __init__(self, members: Sequence[EmbeddingModel]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members = nn.ModuleList(members)
        self.embedding_dim = sum(member.embedding_dim for member in members)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([F.normalize(member(images), p=2.0, dim=1) for member in self.members], dim=1)
        return F.normalize(joined, p=2.0, dim=1)
