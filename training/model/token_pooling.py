"""Pooling of a transformer's tokens (B, N, C) into one vector per image.

The tokens are the prefix (the class token where the model has one, then DINOv2's register tokens)
followed by the patch tokens. Modes (``model.pooling``):
- ``cls``: the class token (CLIP's and DINOv2's image embedding; SigLIP has none).
- ``mean`` (or ``avg``): the average of the patch tokens, registers and class token left out.
- ``max``, ``avgmax``: max, and average + max, of the patch tokens, as ``GlobalPooling`` over a map.
- ``cls+mean``: the class token and the patch-token average CONCATENATED (2C wide), as DINOv2's
  linear evaluation does; the LayerNorm and head then take 2C features.
- ``map``: an attention-pool head over all tokens (``MapPooling``, timm's ``AttentionPoolLatent``, "multihead
  attention pooling"): SigLIP's image embedding, with its weights from the hub file in a training-free run
  (``tower_projection.tower_head``), learnt with the head otherwise.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import torch
from timm.layers import AttentionPoolLatent
from torch import nn

from retrieval.indexing.common.errors import ConfigError

TokenPoolingMode = Literal["cls", "mean", "avg", "max", "avgmax", "cls+mean"]
TOKEN_MODES: tuple[str, ...] = ("cls", "mean", "avg", "max", "avgmax", "cls+mean")
CLASS_TOKEN_MODES = ("cls", "cls+mean")


class TokenPooling(nn.Module):
    """(B, N, C) tokens -> (B, C) (or (B, 2C) for ``cls+mean``)."""

    def __init__(self, mode: str, *, prefix_tokens: int, class_token: bool) -> None:
        super().__init__()
        if mode not in TOKEN_MODES:
            raise ConfigError(
                f"model.pooling {mode!r} does not pool a transformer's tokens; use {', '.join(TOKEN_MODES)}"
            )
        if mode in CLASS_TOKEN_MODES and not class_token:
            raise ConfigError(f"model.pooling {mode!r} needs a class token, which this backbone has not; use mean")
        self.mode, self.prefix_tokens = mode, prefix_tokens

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        patches = tokens[:, self.prefix_tokens :]
        if self.mode == "cls":
            return tokens[:, 0]
        if self.mode == "cls+mean":
            return torch.cat([tokens[:, 0], patches.mean(dim=1)], dim=1)
        if self.mode == "max":
            return patches.amax(dim=1)
        if self.mode == "avgmax":
            return patches.mean(dim=1) + patches.amax(dim=1)
        return patches.mean(dim=1)

    def output_dim(self, width: int) -> int:
        return 2 * width if self.mode == "cls+mean" else width

    def extra_repr(self) -> str:
        return f"mode={self.mode}, prefix_tokens={self.prefix_tokens}"


class MapPooling(nn.Module):
    """(B, N, C) tokens -> (B, C) by a learnt latent query attending to the tokens: the head timm's ViT builds
    for ``global_pool="map"`` (SigLIP's), shaped from the trunk's own blocks and final norm."""

    def __init__(self, trunk: nn.Module) -> None:
        super().__init__()
        block: Any = trunk.blocks[0]  # type: ignore[index]
        final_norm: Any = trunk.norm
        width = int(trunk.embed_dim)  # type: ignore[arg-type]
        norm_class: Any = final_norm.__class__
        norm_layer: Any = partial(norm_class, eps=final_norm.eps)
        self.attn_pool = AttentionPoolLatent(
            width,
            num_heads=int(block.attn.num_heads),
            mlp_ratio=block.mlp.fc1.out_features / width,
            norm_layer=norm_layer,
            act_layer=type(block.mlp.act),
        )
        self.prefix_tokens = int(trunk.num_prefix_tokens)  # type: ignore[arg-type]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.attn_pool(tokens[:, self.prefix_tokens :])

    def output_dim(self, width: int) -> int:
        return width
