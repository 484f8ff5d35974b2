"""A ``TrainRequest`` resolved to its ``TrainConfig``: the one config assembler of ``retrieval train``
and the Python API's ``train()``.

The recipe's layer (it needs the registered losses, hence torch) goes under the request's layers; the
result is validated and the rules between options are applied (``train_request.refuse_conflicts``).
"""

from __future__ import annotations

from retrieval.training.config.recipes import recipe as recipe_layer
from retrieval.training.config.train_config import TrainConfig, build_config
from retrieval.training.config.train_request import TrainRequest, refuse_conflicts


def resolve_config(request: TrainRequest) -> TrainConfig:
    """The validated configuration a request trains with (its ``config`` as it is, when given); an unknown
    key, a bad value or a conflict between options is a ConfigError naming it."""
    cfg = request.config if request.config is not None else build_config(_all_layers(request))
    refuse_conflicts(cfg, ensemble=request.ensemble, spelling=request.spelling)
    return cfg


def _all_layers(request: TrainRequest) -> list[tuple[str, dict]]:
    layers = request.layers()
    if request.recipe:
        layers.insert(0, (f"recipe {request.recipe}", recipe_layer(request.recipe)))
    return layers
