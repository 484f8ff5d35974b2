"""The pair-family losses' builders, registered with their rows of ``loss_table.yaml`` (descriptions,
defaults, search ranges): pml's pair/triplet losses and ours.

They learn from relations inside one batch, so they want class-balanced C x M batches
and, under torchrun, the batch gathered from all ranks. Distances are pml's defaults
(Euclidean on unit vectors unless the loss is similarity-based). Group Loss, the
prototypical loss and the facility-location loss are ours (modules named after them).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from pytorch_metric_learning import losses as pml
from pytorch_metric_learning.miners import BaseMiner
from pytorch_metric_learning.regularizers import ZeroMeanRegularizer

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses.native.facility_location import FacilityLocationLoss
from retrieval.training.losses.native.group_loss import GroupLoss
from retrieval.training.losses.native.npairs import build_npairs
from retrieval.training.losses.native.prototypical import PrototypicalLoss
from retrieval.training.losses.pml_adapter import PmlPairLoss
from retrieval.training.losses.registry import register_family

TRIPLET_MINING = {"semihard": "semi_hard_triplet", "hard": "hard_triplet", "all": None}


def _pair_builder(pml_class: type[pml.BaseMetricLossFunction]) -> Callable[..., PmlPairLoss]:
    """A builder that passes every param straight to the pml loss."""

    def build(*, num_classes: int, embedding_dim: int, miner: BaseMiner | None, **params: Any) -> PmlPairLoss:
        return PmlPairLoss(pml_class(**params), miner)

    return build


def _build_triplet(
    *, num_classes: int, embedding_dim: int, miner: BaseMiner | None, margin: float, mining: str
) -> PmlPairLoss:
    # `mining` only chooses the default miner (see _triplet_miner); an explicit miner wins
    _check_mining(mining)
    return PmlPairLoss(pml.TripletMarginLoss(margin=margin), miner)


def _triplet_miner(params: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    _check_mining(params["mining"])
    return TRIPLET_MINING[params["mining"]], {"margin": params["margin"]}


def _check_mining(mining: str) -> None:
    if mining not in TRIPLET_MINING:
        raise ConfigError(f"triplet mining must be one of {', '.join(TRIPLET_MINING)}, got {mining!r}")


def _build_margin(
    *,
    num_classes: int,
    embedding_dim: int,
    miner: BaseMiner | None,
    margin: float,
    beta: float,
    nu: float,
    learn_beta: bool,
    class_specific_beta: bool,
) -> PmlPairLoss:
    loss = pml.MarginLoss(
        margin=margin,
        beta=beta,
        nu=nu,
        learn_beta=learn_beta,
        num_classes=num_classes if class_specific_beta else None,
    )
    return PmlPairLoss(loss, miner, num_classes=num_classes if class_specific_beta else None)


def _build_snr(
    *,
    num_classes: int,
    embedding_dim: int,
    miner: BaseMiner | None,
    pos_margin: float,
    neg_margin: float,
    zero_mean_weight: float,
) -> PmlPairLoss:
    """Yuan et al. add lambda * mean_i |sum_m h_im| (pml's ``ZeroMeanRegularizer``) to keep the
    embeddings' components zero-mean, which their SNR analysis assumes; 0 switches it off."""
    if zero_mean_weight < 0:
        raise ConfigError(f"snr zero_mean_weight must be >= 0, got {zero_mean_weight}")
    regularizer = ZeroMeanRegularizer() if zero_mean_weight > 0 else None
    loss = pml.SignalToNoiseRatioContrastiveLoss(
        pos_margin=pos_margin,
        neg_margin=neg_margin,
        embedding_regularizer=regularizer,
        embedding_reg_weight=zero_mean_weight,
    )
    return PmlPairLoss(loss, miner)


def _build_ranked_list(
    *,
    num_classes: int,
    embedding_dim: int,
    miner: BaseMiner | None,
    margin: float,
    alpha: float,
    neg_temperature: float,
    pos_temperature: float,
    imbalance: float,
) -> PmlPairLoss:
    if not 0 <= imbalance <= 1:
        raise ConfigError(f"ranked_list imbalance must be in [0, 1], got {imbalance}")
    with warnings.catch_warnings():
        # pml warns above 5 against overflow; its weights are exp(T * (alpha - d)) with d >= 0 on unit
        # vectors, at most exp(10 * 1.4) at the paper's T_n = 10, far from fp32's limit
        warnings.filterwarnings("ignore", message="Values of Tp or Tn are too high")
        loss = pml.RankedListLoss(
            margin=margin, Tn=neg_temperature, imbalance=imbalance, alpha=alpha, Tp=pos_temperature
        )
    return PmlPairLoss(loss, miner)


def _build_group_loss(*, num_classes: int, embedding_dim: int, miner: BaseMiner | None, **params: Any) -> GroupLoss:
    return GroupLoss(num_classes, embedding_dim, **params)


def _build_prototypical(
    *, num_classes: int, embedding_dim: int, miner: BaseMiner | None, temperature: float
) -> PrototypicalLoss:
    return PrototypicalLoss(temperature)


def _build_facility_location(
    *, num_classes: int, embedding_dim: int, miner: BaseMiner | None, gamma: float, pam_iterations: int
) -> FacilityLocationLoss:
    return FacilityLocationLoss(gamma, pam_iterations)


register_family(
    "pair",
    "balanced",
    {
        "contrastive": _pair_builder(pml.ContrastiveLoss),
        "triplet": _build_triplet,
        "lifted_structure": _pair_builder(pml.LiftedStructureLoss),
        "npairs": build_npairs,
        "ntxent": _pair_builder(pml.NTXentLoss),
        "angular": _pair_builder(pml.AngularLoss),
        "margin": _build_margin,
        "multi_similarity": _pair_builder(pml.MultiSimilarityLoss),
        "fastap": _pair_builder(pml.FastAPLoss),
        "snr": _build_snr,
        "ranked_list": _build_ranked_list,
        "group_loss": _build_group_loss,
        "prototypical": _build_prototypical,
        "facility_location": _build_facility_location,
    },
    choose_default_miner={"triplet": _triplet_miner},
)
