"""What ``retrieval study`` searches for one loss: its declared ranges plus the learning rates.

A loss declares ranges of its own parameters in its registry entry (``LossSpec.search_space``,
``param -> ("log" | "float" | "int", low, high)`` or ``("categorical", [choices])``). The study
always adds the learning rates: the new layers' (``optimizer.head_lr``), the loss parameters'
(``loss.lr``, only for losses that have parameters, e.g. proxies) and, when the whole network
trains, the backbone's (``optimizer.lr``). Keys are dotted config paths (``loss.params.margin``),
so a trial's values become a config layer; a key fixed with ``--set`` is not searched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses import LossSpec

Dimension = tuple[Any, ...]
KINDS = ("log", "float", "int", "categorical")

HEAD_LR: Dimension = ("log", 1e-4, 3e-2)
LOSS_LR: Dimension = ("log", 1e-4, 1e-1)
BACKBONE_LR: Dimension = ("log", 1e-6, 1e-3)


def study_space(
    spec: LossSpec, *, fine_tune: bool, has_loss_parameters: bool, fixed: Iterable[str] = ()
) -> dict[str, Dimension]:
    """The searched dimensions of ``spec``'s loss, keyed by dotted config path, minus the ``fixed`` keys."""
    check_loss_space(spec)
    space: dict[str, Dimension] = {f"loss.params.{name}": dim for name, dim in spec.search_space.items()}
    space["optimizer.head_lr"] = HEAD_LR
    if has_loss_parameters:
        space["loss.lr"] = LOSS_LR
    if fine_tune:
        space["optimizer.lr"] = BACKBONE_LR
    skipped = set(fixed)
    return {key: dim for key, dim in space.items() if key not in skipped}


def check_loss_space(spec: LossSpec) -> None:
    """A declared range must name an accepted parameter and be well formed (a programming error otherwise)."""
    for name, dim in spec.search_space.items():
        if name not in spec.default_params:
            raise ConfigError(f"loss {spec.name!r} searches {name!r}, which is not one of its parameters")
        to_distribution(f"{spec.name}.{name}", dim)


def to_distribution(key: str, dim: Dimension) -> BaseDistribution:
    """An optuna distribution for one dimension; ConfigError for a malformed one."""
    kind = dim[0] if dim else None
    if kind == "categorical" and len(dim) == 2 and list(dim[1]):
        return CategoricalDistribution(list(dim[1]))
    if kind in ("log", "float", "int") and len(dim) == 3 and dim[1] < dim[2]:
        if kind == "int":
            return IntDistribution(int(dim[1]), int(dim[2]))
        if kind == "log" and dim[1] <= 0:
            raise ConfigError(f"search range {key}: a log range needs a positive low end, got {dim}")
        return FloatDistribution(float(dim[1]), float(dim[2]), log=kind == "log")
    raise ConfigError(
        f"search range {key} = {dim!r} is malformed; use (kind, low, high) with low < high and kind one of "
        f"log, float, int, or ('categorical', [choices])"
    )


def distributions(space: Mapping[str, Dimension]) -> dict[str, BaseDistribution]:
    return {key: to_distribution(key, dim) for key, dim in space.items()}


def params_layer(params: Mapping[str, Any]) -> dict[str, Any]:
    """``{"loss.params.margin": 0.1}`` -> ``{"loss": {"params": {"margin": 0.1}}}`` (a config layer)."""
    layer: dict[str, Any] = {}
    for key, value in params.items():
        *parents, leaf = key.split(".")
        node = layer
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return layer


def flat_keys(layer: Mapping[str, Any], prefix: str = "") -> set[str]:
    """The dotted paths of a config layer's leaves (``--set`` values, to leave them out of the search)."""
    keys: set[str] = set()
    for key, value in layer.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            keys |= flat_keys(value, f"{path}.")
        else:
            keys.add(path)
    return keys
