"""Named starting points (``--recipe``): one per loss, sharing everything but the loss.

The Reality Check paper's lesson is that comparisons are only fair with the same
backbone, embedding size, augmentation and optimizer; so every recipe inherits the
same base and changes only the loss, its paper defaults and the sampler it needs.
Zhai & Wu's normalized softmax settings (LayerNorm without affine, temperature 0.05,
one warm-start epoch training only the new layers, 2048-d embeddings that binarize
at zero) are the base because they are the product's default; their optimisation
(SGD, step schedule, class-balanced batches of 75) is not, and ``zhai_wu`` is the one
recipe that reproduces a paper's own setup rather than the shared base.
"""

from __future__ import annotations

from typing import Any

from retrieval.indexing.common.registry import Registry

BASE_RECIPE: dict[str, Any] = {
    "model": {"layer_norm": True, "embedding_dim": 2048, "pooling": "avg"},
    "optimizer": {"name": "adamw", "lr": 1e-4, "head_lr": 1e-3, "weight_decay": 1e-4},
    "schedule": {"name": "cosine", "warmup_epochs": 0.0},
    "trainer": {"warm_start_epochs": 1, "batch_size": 32},
    "data": {"images_per_class": 4},
}

# loss-specific settings layered over BASE_RECIPE (paper values where they differ from the loss defaults)
_LOSS_OVERRIDES: dict[str, dict[str, Any]] = {
    "normalized_softmax": {"loss": {"params": {"temperature": 0.05}, "lr": 1e-2}},
    "triplet": {"loss": {"params": {"margin": 0.1}}},  # Reality Check: the best margin is near 0.1, not 1
    "proxy_anchor": {"loss": {"lr": 1e-2}},  # Kim et al.: proxies learn 100x faster than the backbone
    "proxy_nca": {"loss": {"lr": 1e-2}},
    "arcface": {"loss": {"lr": 1e-2}},
    "cosface": {"loss": {"lr": 1e-2}},
    "soft_triple": {"loss": {"lr": 1e-2}},
}

ALIASES = {"normsoftmax": "normalized_softmax", "ms": "multi_similarity", "proxyanchor": "proxy_anchor"}

# A paper's own, complete setup: name -> (the loss it trains, the layer over that loss's recipe).
# Zhai & Wu, BMVC 2019, section 5, for their BatchNorm ResNet50: one epoch training only the new
# parameters, then 30 epochs of all of them at the same rate, SGD momentum 0.9, weight decay 1e-4,
# lr x0.1 at epoch 15 (the trainer counts the warm-start epoch, hence 31 and 16); batches of 75 =
# 25 images of each of 3 classes (Table 4's best; the paper takes 5 per class on SOP).
_PAPER_RECIPES: dict[str, tuple[str, dict[str, Any]]] = {
    "zhai_wu": (
        "normalized_softmax",
        {
            "model": {"backbone": "resnet50"},
            "optimizer": {
                "name": "sgd",
                "lr": 1e-2,
                "head_lr": 1e-2,
                "momentum": 0.9,
                "weight_decay": 1e-4,
                "grad_clip_norm": None,
            },
            "loss": {"lr": 1e-2},
            "schedule": {"name": "step", "step_epochs": 16, "step_gamma": 0.1, "warmup_epochs": 0.0},
            "trainer": {"epochs": 31, "warm_start_epochs": 1, "batch_size": 75},
            "data": {"sampler": "balanced", "images_per_class": 25},
        },
    ),
}

_BASE_DESCRIPTION = "AdamW (lr 1e-4 backbone, 1e-3 new layers), cosine schedule, LayerNorm, 2048-d, batches of 32"
_DESCRIPTIONS = {
    "normalized_softmax": (
        "Zhai & Wu's loss and model (temperature 0.05, LayerNorm without affine, 2048-d, one warm-start "
        "epoch) on the shared base, which is not the paper's optimisation: AdamW (lr 1e-4 backbone, 1e-3 "
        "new layers, 1e-2 class weights), cosine schedule, shuffled batches of 32, the configured backbone. "
        "The paper: ResNet50, SGD momentum 0.9 at lr 1e-2 for all parameters, x0.1 after 15 of 30 epochs, "
        "class-balanced batches of 75 = 3 classes x 25 images; --recipe zhai_wu trains that"
    ),
    "zhai_wu": (
        "Zhai & Wu's own setup: ResNet50 (add --pretrained imagenet, as they start from ImageNet), "
        "LayerNorm + 2048-d, normalized softmax at temperature 0.05, SGD momentum 0.9, lr 1e-2 for all "
        "parameters, weight decay 1e-4, one warm-start epoch then 30 epochs with lr x0.1 after 15, "
        "class-balanced batches of 75 = 3 classes x 25 images (SOP: --images-per-class 5); it keeps "
        "our RandomResizedCrop augmentation instead of their 224 crops of 256x256 images"
    ),
}


def recipe_registry() -> Registry[str]:
    """Recipe names (every registered loss, plus short aliases) -> the loss each trains.

    Built on each call, so a loss registered after import has a recipe too.
    """
    from retrieval.training.losses import available_losses

    table: Registry[str] = Registry("recipe")
    for spec in available_losses():
        table.register(spec.name, spec.name)
    for alias, loss_name in ALIASES.items():
        table.register(alias, loss_name)
    for name, (loss_name, _) in _PAPER_RECIPES.items():
        table.register(name, loss_name)
    return table


def recipe(name: str) -> dict[str, Any]:
    """The config layer for ``--recipe name`` (a loss name, an alias or a paper's own setup)."""
    from retrieval.training.config import merge_dicts

    loss_name = recipe_registry().get(name)
    layer = merge_dicts(BASE_RECIPE, {"loss": {"name": loss_name}})
    layer = merge_dicts(layer, _LOSS_OVERRIDES.get(loss_name, {}))
    return merge_dicts(layer, _PAPER_RECIPES[name][1]) if name in _PAPER_RECIPES else layer


def describe_recipe(name: str) -> str:
    """One paragraph: what ``--recipe name`` trains and how it differs from the loss's paper."""
    loss_name = recipe_registry().get(name)
    described = _DESCRIPTIONS.get(name) or _DESCRIPTIONS.get(loss_name)
    return described or f"{loss_name} with its paper's loss parameters on the shared base: {_BASE_DESCRIPTION}"
