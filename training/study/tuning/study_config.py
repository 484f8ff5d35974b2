"""The training configuration of one loss in a study, and what its search varies.

Layers, in order: the loss's recipe (``--recipe LOSS``: the shared base plus the paper's loss
settings), the study's defaults (early stopping after ``STUDY_PATIENCE`` epochs without a better
validation MAP@R), the budget options of the command line, ``--set`` (all of them, or ``--set LOSS:KEY=VALUE`` for one
loss), then a trial's values and
the run's seed. Built once per loss before any image is read, so a bad option fails at once.
"""

from __future__ import annotations

from typing import Any

import torch

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.loss_and_sampler import loss_from_config
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import TrainConfig, build_config, parse_set
from retrieval.training.losses import get_loss_spec
from retrieval.training.study.study_state import StudySpec
from retrieval.training.study.tuning.search_space import Dimension, flat_keys, params_layer, study_space

STUDY_PATIENCE = 3


def loss_config(
    spec: StudySpec, loss: str, params: dict[str, Any] | None = None, seed: int | None = None
) -> TrainConfig:
    """The resolved config of ``loss`` (a recipe name) with a trial's ``params`` and a run's ``seed``."""
    layers: list[tuple[str, dict[str, Any]]] = [
        (f"recipe {loss}", recipe(loss)),
        ("study defaults", {"data": {"path": spec.data}, "trainer": {"patience": STUDY_PATIENCE}}),
        ("command-line options", spec.options),
        ("--set", parse_set(overrides_for(spec, loss))),
    ]
    if params:
        layers.append(("search", params_layer(params)))
    if seed is not None:
        layers.append(("seed", {"trainer": {"seed": seed}}))
    return build_config(layers)


def overrides_for(spec: StudySpec, loss: str) -> list[str]:
    """The ``--set`` assignments of one loss: unprefixed ones, and those prefixed ``LOSS:`` with its name
    (``--set triplet:loss.params.margin=0.1`` leaves the other losses alone)."""
    chosen = []
    for assignment in spec.overrides:
        key = assignment.partition("=")[0]
        if ":" not in key:
            chosen.append(assignment)
            continue
        prefix, _, rest = assignment.partition(":")
        if prefix not in spec.losses:
            raise ConfigError(
                f"--set {assignment}: {prefix!r} is not one of --losses ({', '.join(spec.losses)}); "
                "write LOSS:KEY=VALUE or KEY=VALUE"
            )
        if prefix == loss:
            chosen.append(rest)
    return chosen


def loss_search_space(spec: StudySpec, loss: str) -> dict[str, Dimension]:
    """The dimensions searched for ``loss``; keys fixed with ``--set`` stay fixed."""
    cfg = loss_config(spec, loss)
    return study_space(
        get_loss_spec(cfg.loss.name),
        fine_tune=not spec.cached_features,
        has_loss_parameters=has_loss_parameters(cfg),
        fixed=flat_keys(parse_set(overrides_for(spec, loss))),
    )


def has_loss_parameters(cfg: TrainConfig) -> bool:
    """Whether the loss learns parameters of its own (proxies, class weights, a margin's beta)."""
    with torch.random.fork_rng(devices=[]):
        loss = loss_from_config(cfg, num_classes=4, embedding_dim=8)
    return any(parameter.requires_grad for parameter in loss.loss_parameters())
