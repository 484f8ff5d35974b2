"""The reference row: the backbone's own pooled features, before any metric learning.

As in the Reality Check's tables, a trained model is compared with the backbone it started from:
the same trunk and global pooling (no LayerNorm, no head), reduced to the embedding size with PCA
when the pooled features are wider, then L2-normalised. The PCA, and the mean the features are
centred on, are fitted on at most ``FIT_IMAGES`` images of the TRAINING classes, never on the
evaluated ones. Features that are not wider than the embedding are kept as they are, centred on
that training mean: pooled ReLU features are all positive, so their sign bits at zero would be
nearly all ones, while centred they split each dimension at its training mean.

A CLIP backbone started from the hub's CLIP weights (``hub_access.has_tower_embedding``) has an embedding of
its own, the one its text tower was trained against: its reference is that, the class token after the final
norm times the tower's projection (``tower_reference``), nothing fitted; SigLIP's is its attention-pool head
over the tokens (no projection). Its export can then carry the text
tower (``export.text_export``).

The row is "pretrained" when the run starts from pretrained weights (``model.pretrained``) and
"untrained" (its random initial backbone) when it does not. The trainer and ``retrieval eval``
both compute it here, with the eval transform of the run.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import faiss
import numpy as np
import torch
from torch import nn

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.splits import record_sort_key
from retrieval.training.config.hub_access import has_tower_embedding
from retrieval.training.config.train_config import ModelConfig, TrainConfig
from retrieval.training.data_pipeline.data_loaders import build_eval_loader
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset, label_index
from retrieval.training.model.device import Precision
from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.model.tower_projection import tower_pooling_mode
from retrieval.training.run.inputs.embed import embed_loader

FIT_IMAGES = 2000  # training images the PCA and the mean are fitted on (evenly spaced over the classes)


def reference_name(model: ModelConfig) -> str:
    """The row's name: "pretrained" when the run starts from pretrained weights, else "untrained" (random)."""
    return "pretrained" if model.pretrained else "untrained"


def fit_sample(records: Sequence[ImageRecord], size: int = FIT_IMAGES) -> list[ImageRecord]:
    """At most ``size`` records, evenly spaced in (label, path) order: deterministic, whatever the input order."""
    ordered = sorted(records, key=record_sort_key)
    if len(ordered) <= size:
        return ordered
    return [ordered[i] for i in np.unique(np.linspace(0, len(ordered) - 1, size).round().astype(int))]


@dataclass(frozen=True)
class FeatureReduction:
    """Centre on the training mean, project on the top principal components (``pca``) if any, L2-normalise."""

    mean: np.ndarray
    pca: faiss.PCAMatrix | None

    @property
    def dim(self) -> int:
        return int(self.pca.d_out) if self.pca is not None else len(self.mean)

    def apply(self, features: np.ndarray) -> np.ndarray:
        values = np.ascontiguousarray(features, dtype=np.float32)
        reduced = self.pca.apply(values) if self.pca is not None else values - self.mean
        return reduced / np.maximum(np.linalg.norm(reduced, axis=1, keepdims=True), 1e-12)

    def linear(self) -> nn.Linear:
        """The reduction as a linear layer (before the L2 normalisation): ``W x + b``."""
        if self.pca is not None:
            weight = faiss.vector_to_array(self.pca.A).reshape(self.pca.d_out, self.pca.d_in)
            bias = faiss.vector_to_array(self.pca.b)
        else:
            weight, bias = np.eye(len(self.mean), dtype=np.float32), -self.mean
        layer = nn.Linear(weight.shape[1], weight.shape[0])
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight, dtype=np.float32)))
            layer.bias.copy_(torch.from_numpy(np.ascontiguousarray(bias, dtype=np.float32)))
        return layer


def fit_reduction(train_features: np.ndarray, dim: int) -> FeatureReduction:
    """PCA to ``dim`` when the features are wider (at most one component per training image), else centring."""
    values = np.ascontiguousarray(train_features, dtype=np.float32)
    if len(values) == 0:
        raise DataError("no readable training-class image to fit the reference row's centring and PCA on")
    mean = values.mean(axis=0)
    if dim >= values.shape[1]:
        return FeatureReduction(mean, None)
    pca = faiss.PCAMatrix(values.shape[1], min(dim, len(values)))  # faiss centres on the same mean
    pca.train(values)
    return FeatureReduction(mean, pca)


def reference_model_config(model: ModelConfig, dim: int) -> ModelConfig:
    """The model section of a reference model: no LayerNorm, a linear head to ``dim`` (the reduction's size,
    or a CLIP tower's projection after its class token), or SigLIP's attention pool and no head."""
    if not has_tower_embedding(model):
        return model.model_copy(update={"layer_norm": False, "embedding_dim": dim})
    pooling = tower_pooling_mode(model.backbone)
    embedding_dim = None if pooling == "map" else dim
    return model.model_copy(update={"layer_norm": False, "embedding_dim": embedding_dim, "pooling": pooling})


def reference_model(model: EmbeddingModel, reduction: FeatureReduction) -> EmbeddingModel:
    """The reference row as a model: a copy of ``model``'s trunk and pooling, then the reduction as its head
    and L2 normalisation. It embeds, exports and is chosen like any trained epoch (the trainer's epoch 0)."""
    reference = copy.deepcopy(model)
    reference.norm = nn.Identity()
    reference.head = reduction.linear().to(next(model.parameters()).device)
    reference.embedding_dim = reduction.dim
    return reference


def tower_reference(model: EmbeddingModel, pool: nn.Module, head: nn.Module) -> EmbeddingModel:
    """The reference of a CLIP or SigLIP run: a copy of ``model``'s trunk, the tower's ``pool`` and ``head``
    (``tower_projection.tower_head``), L2-normalised (open_clip's ``encode_image``)."""
    reference = copy.deepcopy(model)
    device = next(model.parameters()).device
    reference.pool = pool.to(device)  # type: ignore[assignment]
    reference.norm = nn.Identity()
    reference.head = head.to(device)  # type: ignore[assignment]
    reference.embedding_dim = head.out_features if isinstance(head, nn.Linear) else model.feature_dim
    return reference


class PooledFeatures(nn.Module):
    """images -> the model's pooled backbone features (before LayerNorm and head)."""

    def __init__(self, model: EmbeddingModel) -> None:
        super().__init__()
        self.model = model  # a submodule, so train()/eval() go through EmbeddingModel's (frozen BatchNorm stays)

    def forward(self, inputs: torch.Tensor, start_stage: int = 0) -> torch.Tensor:
        trunk = self.model.backbone(inputs) if start_stage == 0 else self.model.trunk_from(inputs, start_stage)
        return self.model.pool(trunk)


@dataclass(frozen=True)
class ReferenceEmbeddings:
    """The reference embedding of each evaluated record; rows of unreadable images are in ``dataset.bad_mask()``."""

    name: str
    embeddings: np.ndarray
    labels: np.ndarray
    dataset: ImageRecordDataset
    feature_dim: int
    dim: int
    fit_images: int

    def details(self) -> dict[str, object]:
        """What the row is, for metrics files."""
        return {
            "name": self.name,
            "feature_dim": self.feature_dim,
            "dim": self.dim,
            "reduction": "pca" if self.dim < self.feature_dim else "centred",
            "fit_images": self.fit_images,
        }


def pretrained_reference(
    model: EmbeddingModel,
    cfg: TrainConfig,
    records: Sequence[ImageRecord],
    train_records: Sequence[ImageRecord],
    *,
    dim: int,
    device: torch.device,
    precision: Precision,
) -> ReferenceEmbeddings:
    """Reference embeddings of ``records``: ``model``'s pooled features reduced to ``dim`` as fitted on
    ``train_records`` (``fit_sample`` of them). ``model`` holds the starting weights (see ``reference_name``)."""
    trunk = PooledFeatures(model)
    fit_features, _, _ = _pooled(trunk, cfg, fit_sample(train_records), device, precision, drop_unreadable=True)
    reduction = fit_reduction(fit_features, dim)
    features, labels, dataset = _pooled(trunk, cfg, records, device, precision, drop_unreadable=False)
    return ReferenceEmbeddings(
        reference_name(cfg.model),
        reduction.apply(features),
        labels,
        dataset,
        feature_dim=features.shape[1],
        dim=reduction.dim,
        fit_images=len(fit_features),
    )


def _pooled(
    trunk: PooledFeatures,
    cfg: TrainConfig,
    records: Sequence[ImageRecord],
    device: torch.device,
    precision: Precision,
    *,
    drop_unreadable: bool,
) -> tuple[np.ndarray, np.ndarray, ImageRecordDataset]:
    """Pooled features of ``records`` under the run's eval transform (unreadable rows dropped or kept)."""
    loader = build_eval_loader(records, label_index(records), cfg, device)
    features, labels = embed_loader(trunk, loader, device, precision, cfg.model.channels_last)
    dataset: ImageRecordDataset = loader.dataset  # type: ignore[assignment]
    if drop_unreadable:
        keep = ~dataset.bad_mask()
        features, labels = features[keep], labels[keep]
    return features, labels, dataset
