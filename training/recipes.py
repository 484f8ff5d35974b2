"""Named starting points (``--recipe``): one per loss, sharing everything but the loss.

The Reality Check paper's lesson is that comparisons are only fair with the same
backbone, embedding size, augmentation and optimizer; so every recipe inherits the
same base and changes only the loss, its paper defaults and the sampler it needs.
Zhai & Wu's normalized softmax settings (LayerNorm without affine, temperature 0.05,
one warm-start epoch training only the new layers, 2048-d embeddings that binarize
at zero) are the base because they are the product's default.
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
    return table


def recipe(name: str) -> dict[str, Any]:
    """The config layer for ``--recipe name`` (a loss name or an alias)."""
    from retrieval.training.config import merge_dicts

    loss_name = recipe_registry().get(name)
    layer = merge_dicts(BASE_RECIPE, {"loss": {"name": loss_name}})
    return merge_dicts(layer, _LOSS_OVERRIDES.get(loss_name, {}))
