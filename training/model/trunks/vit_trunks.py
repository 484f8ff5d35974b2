"""Vision transformers from timm as trunks: built for the run's image size, returning their tokens.

``timm.create_model(name, num_classes=0, global_pool="", img_size=S)`` keeps the whole transformer
and drops timm's pooling and classifier, so the trunk maps images (B, 3, S, S) to its tokens
(B, prefix + (S / patch)^2, C) after the final norm: the class token (where the model has one),
the register tokens (DINOv2 "reg4"), then the patch tokens. ``token_pooling`` turns them into one
vector. The position embedding is made for the S / patch grid at creation, so the graph has no
run-time interpolation and exports to ONNX exactly; pretrained weights made at another size are
resampled to it when loaded (``fit_state_dict``, timm's own ``checkpoint_filter_fn``).

Stages (``vit_stages``, for ``model.frozen_stages``): the embedding (patches, class and register
tokens, position embedding), each transformer block, the final norm. Freezing N stages freezes
the embedding and the first N - 1 blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch
from torch import nn

from retrieval.training.config.image_sizes import check_patch_multiple

VIT_MODULE = "vision_transformer"


def is_vit_name(timm_module: ModuleType, name: str) -> bool:
    """Whether the timm model ``name`` (a tag like ``.lvd142m`` allowed) is one of timm's VisionTransformers."""
    return bool(timm_module.models.is_model_in_modules(name.split(".")[0], [VIT_MODULE]))


def is_token_trunk(trunk: nn.Module) -> bool:
    """Whether ``trunk`` returns tokens (B, N, C) (a timm VisionTransformer) rather than a map (B, C, h, w)."""
    return all(hasattr(trunk, attr) for attr in ("patch_embed", "blocks", "num_prefix_tokens", "_pos_embed"))


def patch_size(trunk: nn.Module) -> int:
    return int(trunk.patch_embed.patch_size[0])  # type: ignore[union-attr, index]


def build_vit_trunk(timm_module: ModuleType, name: str, image_size: int | None) -> tuple[nn.Module, int]:
    """(timm ViT returning its tokens for images of ``image_size`` (None: timm's default), token width)."""
    size = {} if image_size is None else {"img_size": image_size}
    model = timm_module.create_model(name, pretrained=False, num_classes=0, global_pool="", **size)
    if image_size is not None:
        check_patch_multiple(name, image_size, patch_size(model))
    return model, int(model.num_features)


class ViTEmbedding(nn.Module):
    """The first stage of a ViT: patch embedding, class/register tokens and position embedding, pre-norm.

    A view over the trunk's own modules and parameters (registered here too, so freezing this stage
    freezes them); the token and position logic is timm's ``_pos_embed`` of the trunk itself."""

    def __init__(self, trunk: nn.Module) -> None:
        super().__init__()
        self.patch_embed, self.patch_drop, self.norm_pre = (
            _module(trunk, "patch_embed"),
            _module(trunk, "patch_drop"),
            _module(trunk, "norm_pre"),
        )
        for name in ("cls_token", "reg_token", "pos_embed"):
            parameter = getattr(trunk, name, None)
            if isinstance(parameter, nn.Parameter):
                self.register_parameter(name, parameter)
        self._add_tokens: Callable[[torch.Tensor], torch.Tensor] = trunk._pos_embed  # type: ignore[assignment]
        # (a bound method: the trunk itself is not a child of this view)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        tokens = self._add_tokens(self.patch_embed(images))
        return self.norm_pre(self.patch_drop(tokens))


def _module(trunk: nn.Module, name: str) -> nn.Module:
    module = getattr(trunk, name)
    assert isinstance(module, nn.Module)
    return module


def vit_stages(trunk: nn.Module) -> list[nn.Module]:
    """The ViT's stages: the embedding, each block, the final norm (running them in order is the trunk)."""
    blocks = _module(trunk, "blocks")
    assert isinstance(blocks, nn.Sequential)
    return [ViTEmbedding(trunk), *blocks, _module(trunk, "norm")]


def fit_state_dict(state: dict[str, torch.Tensor], trunk: nn.Module) -> dict[str, torch.Tensor]:
    """Pretrained ViT tensors adapted to ``trunk`` by timm (position embedding resampled to its grid)."""
    from timm.models.vision_transformer import checkpoint_filter_fn

    return dict(checkpoint_filter_fn(state, trunk))  # type: ignore[arg-type]  # a VisionTransformer
