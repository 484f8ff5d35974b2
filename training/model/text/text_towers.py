"""A CLIP (or SigLIP) model's two towers from open_clip: the text tower exported beside the image tower.

The hub file of a backbone in ``text_side.TEXT_TOWERS`` is open_clip's whole model (``hub_access.hub_files``).
open_clip builds it by its model name (``ViT-B-32``) with its pretrained tag's settings (OpenAI's weights use
QuickGELU) and loads the file; ``TextTower`` and ``ImageTower`` are its ``encode_text`` and ``encode_image``,
L2-normalised, as modules ONNX exports. The image trunk of a run stays timm's (``vit_trunks``), which reads
the same file (timm's ``checkpoint_filter_fn`` converts open_clip's names), and ``tower_projection`` makes
its tokens ``encode_image`` (CLIP's class token times the projection, SigLIP's attention-pool head).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.text_side import TEXT_TOWERS
from retrieval.training.config.hub_access import HubAccess
from retrieval.training.model.hub_weights import hub_weights_file


def open_clip_module() -> ModuleType:
    """open_clip, or a ConfigError saying how to install it (the `pretrained` extra)."""
    try:
        import open_clip
        import open_clip.tokenizer
    except ImportError:  # the `pretrained` extra brings it
        raise ConfigError(
            "a CLIP or SigLIP text tower needs the open_clip_torch package: pip install 'retrieval[pretrained]' "
            "(or pip install open_clip_torch)"
        ) from None
    return open_clip


def tower_source(backbone: str) -> str:
    """Where the towers come from, in model.json's words: ``open_clip ViT-B-32 openai``."""
    name, tag = TEXT_TOWERS[backbone]
    return f"open_clip {name} {tag}"


def open_clip_model(backbone: str, weights: Path) -> nn.Module:
    """``backbone``'s open_clip model (both towers) with the weights file ``weights``, in eval mode."""
    name, tag = TEXT_TOWERS[backbone]
    open_clip = open_clip_module()
    quick_gelu = bool(open_clip.get_pretrained_cfg(name, tag).get("quick_gelu", False))
    try:
        model = open_clip.create_model(name, pretrained=str(weights), force_quick_gelu=quick_gelu)
    except (RuntimeError, KeyError, ValueError) as error:  # open_clip's load_state_dict of another model's file
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ConfigError(f"{weights} is not open_clip's {name} model ({type(error).__name__}: {first})") from None
    return model.eval()


def hub_clip_model(backbone: str, access: HubAccess) -> nn.Module:
    """``open_clip_model`` of ``backbone``'s hub file (the cached copy; downloaded only with consent)."""
    return open_clip_model(backbone, hub_weights_file(backbone, access))


class _Tower(nn.Module):
    """One tower of a CLIP model as a module, its embedding L2-normalised."""

    side = "image"

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        encode = getattr(self.model, f"encode_{self.side}")
        return encode(inputs, normalize=True)


class TextTower(_Tower):
    """token ids (N, context_length) int64 -> unit-norm text embeddings (N, D), in the image tower's space."""

    side = "text"


class ImageTower(_Tower):
    """images (N, 3, S, S) -> unit-norm image embeddings (N, D): open_clip's ``encode_image``."""
