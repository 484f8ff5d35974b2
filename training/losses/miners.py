"""The miner registry: names -> pytorch-metric-learning miners with their papers' defaults.

A miner picks the informative pairs/triplets of a batch before a pair loss sees it.
``default_params`` lists every parameter a miner accepts, so a typo is rejected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytorch_metric_learning import miners as pml_miners

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.common.registry import Registry
from retrieval.training.losses.params import merge_params

TRIPLET_TYPES = ("all", "hard", "semihard", "easy")


@dataclass(frozen=True)
class MinerSpec:
    name: str
    description: str
    default_params: dict[str, Any]
    builder: Callable[..., pml_miners.BaseMiner]


MINERS: Registry[MinerSpec] = Registry("miner")


def register_miner(spec: MinerSpec) -> None:
    MINERS.register(spec.name, spec)


def available_miners() -> list[str]:
    return MINERS.names()


def get_miner_spec(name: str) -> MinerSpec:
    return MINERS.get(name)


def build_miner(name: str, params: dict[str, Any] | None = None) -> pml_miners.BaseMiner:
    """A fresh miner; ``params`` override the spec's defaults (unknown names rejected)."""
    spec = get_miner_spec(name)
    return spec.builder(**merge_params(spec.default_params, params, f"miner {name!r}"))


def _triplet_miner(margin: float, type_of_triplets: str) -> pml_miners.TripletMarginMiner:
    if type_of_triplets not in TRIPLET_TYPES:
        raise ConfigError(f"type_of_triplets must be one of {', '.join(TRIPLET_TYPES)}, got {type_of_triplets!r}")
    return pml_miners.TripletMarginMiner(margin=margin, type_of_triplets=type_of_triplets)


register_miner(
    MinerSpec(
        "semi_hard_triplet",
        "triplets whose negative is farther than the positive but within the margin (FaceNet)",
        {"margin": 0.2, "type_of_triplets": "semihard"},
        _triplet_miner,
    )
)
register_miner(
    MinerSpec(
        "hard_triplet",
        "triplets whose negative is closer than the positive",
        {"margin": 0.2, "type_of_triplets": "hard"},
        _triplet_miner,
    )
)
register_miner(
    MinerSpec(
        "multi_similarity",
        "pairs that violate the hardest opposite pair by epsilon (Wang et al. 2019)",
        {"epsilon": 0.1},
        pml_miners.MultiSimilarityMiner,
    )
)
register_miner(
    MinerSpec(
        "distance_weighted",
        "triplets with negatives drawn by inverse distance density (Wu et al. 2017)",
        {"cutoff": 0.5, "nonzero_loss_cutoff": 1.4},
        pml_miners.DistanceWeightedMiner,
    )
)
register_miner(
    MinerSpec(
        "pair_margin",
        "positive pairs farther than pos_margin and negative pairs closer than neg_margin",
        {"pos_margin": 0.2, "neg_margin": 0.8},
        pml_miners.PairMarginMiner,
    )
)
