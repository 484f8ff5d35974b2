"""The loss registry: names (as written in configs and on the CLI) -> loss builders.

``build_loss("triplet", num_classes=100, embedding_dim=512)`` merges the caller's params
over the spec's defaults (the defaults list every accepted parameter), resolves the
miner ("default" = the spec's, None or "none" = none, else a miner-registry name) and calls the
builder. The built-in losses are the rows of ``loss_table.yaml``, registered with their builders by
``pair_losses`` and ``proxy_losses``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pytorch_metric_learning.miners import BaseMiner

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.common.registry import Registry
from retrieval.training.losses.base import EmbeddingLoss
from retrieval.training.losses.miners import build_miner, get_miner_spec
from retrieval.training.losses.params import merge_params

MinerChoice = Callable[[dict[str, Any]], tuple[str | None, dict[str, Any]]]
# A hyperparameter range searched by `retrieval study`: param -> ("log" | "float" | "int", low, high)
# or ("categorical", [choices]); see retrieval.training.study.tuning.search_space.
SearchSpace = dict[str, tuple[Any, ...]]


@dataclass(frozen=True)
class LossSpec:
    """One registered loss. ``builder(num_classes=, embedding_dim=, miner=, **params)``."""

    name: str
    description: str  # one line, shown by `retrieval losses`
    sampler: Literal["balanced", "shuffle"]
    default_params: dict[str, Any]
    default_miner: str | None
    paper: str
    builder: Callable[..., EmbeddingLoss]
    family: str = "pair"  # "pair" (relations inside the batch) or "proxy" (learned class vectors)
    accepts_miner: bool = True
    # Optional: the default miner chosen from the loss params, e.g. triplet's `mining`
    # param picks semi-hard or hard and passes its margin on. Returns (name, miner params).
    choose_default_miner: MinerChoice | None = field(default=None, repr=False)
    # Ranges of loss params that `retrieval study` searches (the learning rates are always searched);
    # empty: only the learning rates.
    search_space: SearchSpace = field(default_factory=dict, repr=False)


LOSSES: Registry[LossSpec] = Registry("loss", "losses")


def register_loss(spec: LossSpec) -> None:
    if spec.default_miner is not None:
        get_miner_spec(spec.default_miner)
    LOSSES.register(spec.name, spec)


LOSS_TABLE = Path(__file__).with_name("loss_table.yaml")  # each built-in loss's description, defaults, ranges


def register_family(
    family: str,
    sampler: Literal["balanced", "shuffle"],
    builders: dict[str, Callable[..., EmbeddingLoss]],
    choose_default_miner: dict[str, MinerChoice] | None = None,
) -> None:
    """Register the losses of ``family`` in ``loss_table.yaml`` (``pair_losses``, ``proxy_losses``): a row gives
    the description, the paper, the default params and any other ``LossSpec`` field; the code gives each row's
    builder (one for every row, no other) and any ``choose_default_miner``; the family's batch sampler is the
    caller's."""
    rows = yaml.safe_load(LOSS_TABLE.read_text(encoding="utf-8"))[family]
    if set(rows) != set(builders):
        raise RuntimeError(f"{family} losses: {LOSS_TABLE.name} lists {sorted(rows)}, the builders {sorted(builders)}")
    for name, row in rows.items():
        register_loss(_row_spec(name, row, family, sampler, builders[name], (choose_default_miner or {}).get(name)))


def _row_spec(
    name: str,
    row: dict[str, Any],
    family: str,
    sampler: Literal["balanced", "shuffle"],
    builder: Callable[..., EmbeddingLoss],
    choose_default_miner: MinerChoice | None,
) -> LossSpec:
    """One ``loss_table.yaml`` row as a ``LossSpec`` (a search range's list as the tuple ``SearchSpace`` holds)."""
    return LossSpec(
        name=name,
        description=row["description"],
        sampler=sampler,
        default_params=row["params"],
        default_miner=row.get("miner"),
        paper=row["paper"],
        builder=builder,
        family=family,
        accepts_miner=row.get("accepts_miner", True),
        choose_default_miner=choose_default_miner,
        search_space={param: tuple(span) for param, span in row.get("search_space", {}).items()},
    )


def available_losses() -> list[LossSpec]:
    """All registered losses, sorted by name."""
    return LOSSES.entries()


def get_loss_spec(name: str) -> LossSpec:
    return LOSSES.get(name)


def build_loss(
    name: str,
    *,
    num_classes: int,
    embedding_dim: int,
    params: dict | None = None,
    miner: str | None = "default",
    miner_params: dict | None = None,
) -> EmbeddingLoss:
    """A fresh loss (with fresh, randomly initialised parameters) ready for training."""
    spec = get_loss_spec(name)
    if num_classes < 1 or embedding_dim < 1:
        raise ConfigError(
            f"loss {name!r} needs num_classes >= 1 and embedding_dim >= 1, got {num_classes} and {embedding_dim}"
        )
    merged = merge_params(spec.default_params, params, f"loss {name!r}")
    resolved = resolve_miner(spec, merged, miner, miner_params)
    return spec.builder(num_classes=num_classes, embedding_dim=embedding_dim, miner=resolved, **merged)


def chosen_miner(spec: LossSpec, params: dict[str, Any], miner: str | None) -> tuple[str | None, dict[str, Any]]:
    """(the miner name that ``miner`` stands for, parameters the loss passes on to it): ``"default"`` is the
    spec's default (or its choice from the loss ``params``), ``"none"`` and None are no miner."""
    if miner == "none" or miner is None:
        return None, {}
    if miner == "default" and spec.choose_default_miner is not None:
        return spec.choose_default_miner(params)
    return (spec.default_miner if miner == "default" else miner), {}


def resolve_miner(
    spec: LossSpec, params: dict[str, Any], miner: str | None, miner_params: dict | None
) -> BaseMiner | None:
    """The miner object for ``build_loss``'s ``miner`` argument.

    ``"none"`` is accepted like ``None`` so a YAML config (where null means "default")
    can switch a default miner off.
    """
    miner, derived = chosen_miner(spec, params, miner)
    if miner is None:
        if miner_params:
            raise ConfigError(f"miner_params were given but loss {spec.name!r} uses no miner; name one with `miner`")
        return None
    if not spec.accepts_miner:
        raise ConfigError(f"loss {spec.name!r} does not use a miner; remove miner {miner!r} from the loss config")
    accepted = get_miner_spec(miner).default_params
    derived = {key: value for key, value in derived.items() if key in accepted}
    return build_miner(miner, {**derived, **(miner_params or {})})
