"""``--recipe NAME``: a loss name, an alias or a paper's own setup, resolved to its config layer.

The tables are in ``recipe_tables``; this module adds what needs the registered losses (torch): the
registry of recipe names and the layer of one recipe.
"""

from __future__ import annotations

from typing import Any

from retrieval.indexing.common.registry import Registry
from retrieval.training.config.recipe_tables import (
    ALIASES,
    BASE_DESCRIPTION,
    BASE_RECIPE,
    DESCRIPTIONS,
    LOSS_OVERRIDES,
    PAPER_RECIPES,
)
from retrieval.training.config.train_config import merge_dicts
from retrieval.training.losses import available_losses


def recipe_registry() -> Registry[str]:
    """Recipe names (every registered loss, plus short aliases) -> the loss each trains.

    Built on each call, so a loss registered after import has a recipe too.
    """
    table: Registry[str] = Registry("recipe")
    for spec in available_losses():
        table.register(spec.name, spec.name)
    for alias, loss_name in ALIASES.items():
        table.register(alias, loss_name)
    for name, (loss_name, _) in PAPER_RECIPES.items():
        table.register(name, loss_name)
    return table


def recipe(name: str) -> dict[str, Any]:
    """The config layer for ``--recipe name`` (a loss name, an alias or a paper's own setup)."""
    loss_name = recipe_registry().get(name)
    layer = merge_dicts(BASE_RECIPE, {"loss": {"name": loss_name}})
    layer = merge_dicts(layer, LOSS_OVERRIDES.get(loss_name, {}))
    return merge_dicts(layer, PAPER_RECIPES[name][1]) if name in PAPER_RECIPES else layer


def describe_recipe(name: str) -> str:
    """One paragraph: what ``--recipe name`` trains and how it differs from the loss's paper."""
    loss_name = recipe_registry().get(name)
    described = DESCRIPTIONS.get(name) or DESCRIPTIONS.get(loss_name)
    return described or f"{loss_name} with its paper's loss parameters on the shared base: {BASE_DESCRIPTION}"


def recipe_settings(name: str) -> dict[str, Any]:
    """What ``--recipe name`` sets beyond the shared base, as dotted keys (``loss.params.temperature``):
    its loss, the loss's paper values and, for a paper's own setup, everything that differs."""
    settings = flat_settings(recipe(name)).items()
    return {key: value for key, value in settings if key not in BASE_SETTINGS or BASE_SETTINGS[key] != value}


def flat_settings(layer: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config layer as ``{"section.key": value}`` (nested ``params`` as ``section.params.name``)."""
    flat: dict[str, Any] = {}
    for key, value in layer.items():
        if isinstance(value, dict) and value:
            flat.update(flat_settings(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


BASE_SETTINGS = flat_settings(BASE_RECIPE)
