"""The embedder: backbone trunk -> global pooling -> optional LayerNorm -> optional Linear -> L2 norm.

Pooling modes:
- ``avg``: global average pooling (torchvision's classifiers use it).
- ``max``: global max pooling.
- ``avgmax``: the SUM of average and max pooling, as in the Proxy-Anchor code (Kim et al.,
  CVPR 2020) and later DML baselines; the "Best Practice DML" slides (seeds/001) show max
  pooling beating average pooling for most losses. The sum keeps the feature dimension
  (unlike concatenation), so the head and pretrained shapes do not change.
- ``mean``: ``avg`` by the name the transformer papers use.
A transformer trunk (``vit_trunks``) returns tokens; ``token_pooling`` pools them (``cls``, ``mean``,
``cls+mean``, ...), and the LayerNorm and head take its output width.

The optional LayerNorm has no affine parameters (Zhai & Wu, "Making Classification Competitive
for Deep Metric Learning", BMVC 2019): it standardises the pooled features per sample, which
the paper found to stabilise normalised-softmax training. The output is always L2-normalised,
so the exported ONNX graph returns unit vectors and binarisation at 0 works on them.

A fitted whitening (``model.whitened_dim``, set by the whitening stage, ``with_whitening``) adds one
linear layer after that normalisation and normalises again: the exported graph then holds it as a
MatMul + bias before its last L2 normalisation, and nothing after the model changes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import ModelConfig
from retrieval.training.model.token_pooling import CLASS_TOKEN_MODES, MapPooling, TokenPooling
from retrieval.training.model.trunks.backbones import build_backbone
from retrieval.training.model.trunks.trunk_stages import check_frozen_stages, trunk_stages
from retrieval.training.model.trunks.vit_trunks import is_token_trunk

PoolingMode = Literal["avg", "max", "avgmax", "mean", "cls", "cls+mean", "map"]


class GlobalPooling(nn.Module):
    """(B, C, h, w) -> (B, C) by average, max or (average + max) pooling."""

    def __init__(self, mode: PoolingMode) -> None:
        super().__init__()
        if mode not in ("avg", "max", "avgmax"):
            raise ValueError(f"unknown pooling mode {mode!r}; use avg, max or avgmax")
        self.mode = mode

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.mode == "avg":
            return F.adaptive_avg_pool2d(features, 1).flatten(1)
        if self.mode == "max":
            return F.adaptive_max_pool2d(features, 1).flatten(1)
        avg = F.adaptive_avg_pool2d(features, 1)
        return (avg + F.adaptive_max_pool2d(features, 1)).flatten(1)

    def extra_repr(self) -> str:
        return f"mode={self.mode}"

    def output_dim(self, width: int) -> int:
        return width


def build_pooling(trunk: nn.Module, mode: str) -> GlobalPooling | TokenPooling | MapPooling:
    """The pooling of ``trunk``'s output: over its tokens for a transformer, over its map otherwise."""
    if is_token_trunk(trunk):
        if mode == "map":
            return MapPooling(trunk)
        class_token = getattr(trunk, "cls_token", None) is not None
        return TokenPooling(mode, prefix_tokens=int(trunk.num_prefix_tokens), class_token=class_token)  # type: ignore[arg-type]
    if mode in (*CLASS_TOKEN_MODES, "map"):
        raise ConfigError(f"model.pooling {mode!r} needs a transformer backbone (its tokens); use avg, max or avgmax")
    return GlobalPooling("avg" if mode == "mean" else mode)  # type: ignore[arg-type]


class EmbeddingModel(nn.Module):
    """images (B, 3, H, W) -> unit-norm embeddings (B, embedding_dim)."""

    def __init__(
        self,
        backbone: nn.Module,
        feature_dim: int,
        *,
        backbone_name: str,
        pooling: PoolingMode = "avg",
        layer_norm: bool = False,
        embedding_dim: int | None = 512,
        freeze_batchnorm: bool = False,
        frozen_stages: int = 0,
        whitened_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.pool = build_pooling(backbone, pooling)
        feature_dim = self.pool.output_dim(feature_dim)
        self.norm = nn.LayerNorm(feature_dim, elementwise_affine=False) if layer_norm else nn.Identity()
        self.head = nn.Linear(feature_dim, embedding_dim) if embedding_dim is not None else nn.Identity()
        self.backbone_name = backbone_name
        self.feature_dim = feature_dim
        self.embedding_dim = embedding_dim if embedding_dim is not None else feature_dim
        self.whitening: nn.Linear | None = None
        if whitened_dim is not None:
            self.whitening = nn.Linear(self.embedding_dim, whitened_dim)
            self.embedding_dim = whitened_dim
        self.freeze_batchnorm = freeze_batchnorm
        self.frozen_stages = check_frozen_stages(backbone, frozen_stages) if frozen_stages else 0
        if freeze_batchnorm:
            for module in self._backbone_batchnorms():
                module.requires_grad_(False)
                module.eval()
        self._freeze_prefix()

    def forward(self, inputs: torch.Tensor, start_stage: int = 0) -> torch.Tensor:
        """Embeddings of images (``start_stage`` 0), or of the activations that the trunk's first
        ``start_stage`` stages made of them (``prefix``): the rest of the trunk, pooling and head."""
        features = self.backbone(inputs) if start_stage == 0 else self.trunk_from(inputs, start_stage)
        pooled = self.norm(self.pool(features))
        embeddings = F.normalize(self.head(pooled), p=2.0, dim=1)
        if self.whitening is None:
            return embeddings
        return F.normalize(self.whitening(embeddings), p=2.0, dim=1)

    def prefix(self, images: torch.Tensor, stages: int | None = None) -> torch.Tensor:
        """The activations of the trunk's first ``stages`` stages (default: the frozen ones)."""
        for stage in trunk_stages(self.backbone)[: self.frozen_stages if stages is None else stages]:
            images = stage(images)
        return images

    def trunk_from(self, activations: torch.Tensor, start_stage: int) -> torch.Tensor:
        """The trunk's last feature map from the activations after its first ``start_stage`` stages."""
        for stage in trunk_stages(self.backbone)[start_stage:]:
            activations = stage(activations)
        return activations

    def train(self, mode: bool = True) -> EmbeddingModel:
        """Like nn.Module.train, but frozen BatchNorm layers stay in eval mode (running stats fixed)."""
        super().train(mode)
        if self.freeze_batchnorm:
            for module in self._backbone_batchnorms():
                module.eval()
        for stage in self._frozen_prefix():
            stage.eval()
        return self

    def new_parameters(self) -> Iterator[nn.Parameter]:
        """Parameters of the layers added on top of the backbone (an attention pooling, the head; LayerNorm has
        none)."""
        yield from self.pool.parameters()
        yield from self.norm.parameters()
        yield from self.head.parameters()

    def backbone_parameters(self) -> Iterator[nn.Parameter]:
        """All backbone parameters, including frozen BatchNorm ones (check ``requires_grad``)."""
        yield from self.backbone.parameters()

    def set_backbone_trainable(self, flag: bool) -> None:
        """Enable or disable gradients of the backbone; frozen BatchNorm params and frozen stages stay frozen."""
        self.backbone.requires_grad_(flag)
        if self.freeze_batchnorm:
            for module in self._backbone_batchnorms():
                module.requires_grad_(False)
        self._freeze_prefix()

    def _frozen_prefix(self) -> list[nn.Module]:
        return trunk_stages(self.backbone)[: self.frozen_stages] if self.frozen_stages else []

    def _freeze_prefix(self) -> None:
        """The first ``frozen_stages`` stages: no gradients, and inference-mode BatchNorm (running statistics)."""
        for stage in self._frozen_prefix():
            stage.requires_grad_(False)
            stage.eval()

    def _backbone_batchnorms(self) -> Iterator[_BatchNorm]:
        return (module for module in self.backbone.modules() if isinstance(module, _BatchNorm))


def build_embedding_model(cfg: ModelConfig, *, image_size: int | None = None) -> EmbeddingModel:
    """Build the model with random weights; pretrained weights are loaded by ``load_pretrained``.

    ``image_size``: the input size (``data.image_size``) a transformer trunk is made for (None: its
    default); convolutional trunks take any size."""
    backbone, feature_dim = build_backbone(cfg.backbone, image_size)
    return EmbeddingModel(
        backbone,
        feature_dim,
        backbone_name=cfg.backbone,
        pooling=cfg.pooling,
        layer_norm=cfg.layer_norm,
        embedding_dim=cfg.embedding_dim,
        freeze_batchnorm=cfg.freeze_batchnorm,
        frozen_stages=cfg.frozen_stages,
        whitened_dim=cfg.whitened_dim,
    )


def with_whitening(model: EmbeddingModel, weight: np.ndarray, bias: np.ndarray) -> EmbeddingModel:
    """A copy of ``model`` (without its own whitening, if any) followed by ``x -> x @ weight + bias`` and L2
    normalisation: the whitening stage's map (weight: embedding x output, as ``whitening.LinearMap``)."""
    whitened = copy.deepcopy(model)
    base_dim = model.whitening.in_features if model.whitening is not None else model.embedding_dim
    if weight.shape[0] != base_dim:
        raise ValueError(f"a whitening of {weight.shape[0]}-d inputs does not fit {base_dim}-d embeddings")
    layer = nn.Linear(weight.shape[0], weight.shape[1]).to(next(model.parameters()).device)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight.T, dtype=np.float32)))
        layer.bias.copy_(torch.from_numpy(np.ascontiguousarray(bias, dtype=np.float32)))
    whitened.whitening, whitened.embedding_dim = layer, int(weight.shape[1])
    return whitened


def without_whitening(model: EmbeddingModel) -> EmbeddingModel:
    """A copy of ``model`` that ends at its own (trained) embedding: the input of a whitening."""
    base = copy.deepcopy(model)
    if base.whitening is not None:
        base.embedding_dim, base.whitening = base.whitening.in_features, None
    return base
