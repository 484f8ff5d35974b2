"""The pair-family losses, registered with their defaults: pml's pair/triplet losses and ours.

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
from retrieval.training.losses.registry import family_spec, register_loss

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


_spec = family_spec("pair", "balanced")

for _spec_ in (
    _spec(
        "contrastive",
        "pull positive pairs together, push negatives beyond a margin",
        {"pos_margin": 0.0, "neg_margin": 1.0},
        "Hadsell, Chopra & LeCun, CVPR 2006",
        _pair_builder(pml.ContrastiveLoss),
        search_space={"pos_margin": ("float", 0.0, 0.5), "neg_margin": ("float", 0.3, 1.5)},
    ),
    _spec(
        "triplet",
        "anchor closer to its positive than to a negative by a margin; semi-hard mining",
        {"margin": 0.2, "mining": "semihard"},
        "Schroff et al., FaceNet, CVPR 2015",
        _build_triplet,
        miner="semi_hard_triplet",
        choose_default_miner=_triplet_miner,
        search_space={"margin": ("float", 0.01, 0.5)},
    ),
    _spec(
        "lifted_structure",
        "each positive pair against all negatives of both ends (smooth hinge)",
        {"neg_margin": 1.0, "pos_margin": 0.0},
        "Oh Song et al., CVPR 2016",
        _pair_builder(pml.LiftedStructureLoss),
        search_space={"neg_margin": ("float", 0.3, 1.5), "pos_margin": ("float", 0.0, 0.5)},
    ),
    _spec(
        "npairs",
        "softmax over one positive and N-1 negatives per anchor (one pair per class), cosines / temperature",
        {"temperature": 0.05},
        "Sohn, NeurIPS 2016",
        build_npairs,
        search_space={"temperature": ("log", 0.01, 0.5)},
    ),
    _spec(
        "ntxent",
        "InfoNCE / NT-Xent: softmax of positive similarity over negatives at a temperature",
        {"temperature": 0.07},
        "Chen et al., SimCLR, ICML 2020 (supervised pairs)",
        _pair_builder(pml.NTXentLoss),
        search_space={"temperature": ("log", 0.01, 0.5)},
    ),
    _spec(
        "angular",
        "bounds the angle at the negative of the anchor-positive-negative triangle",
        {"alpha": 40.0},
        "Wang et al., Deep Metric Learning with Angular Loss, ICCV 2017",
        _pair_builder(pml.AngularLoss),
        search_space={"alpha": ("float", 20.0, 55.0)},
    ),
    _spec(
        "margin",
        "positives within beta - margin, negatives beyond beta + margin; distance-weighted sampling",
        {"margin": 0.2, "beta": 1.2, "nu": 0.0, "learn_beta": True, "class_specific_beta": False},
        "Wu et al., Sampling Matters in Deep Embedding Learning, ICCV 2017",
        _build_margin,
        miner="distance_weighted",
        search_space={"margin": ("float", 0.01, 0.5), "beta": ("float", 0.5, 1.6)},
    ),
    _spec(
        "multi_similarity",
        "self, positive and negative relative similarities weighted jointly; MS mining",
        {"alpha": 2.0, "beta": 50.0, "base": 0.5},
        "Wang et al., Multi-Similarity Loss, CVPR 2019",
        _pair_builder(pml.MultiSimilarityLoss),
        miner="multi_similarity",
        search_space={"alpha": ("log", 0.5, 20.0), "beta": ("log", 10.0, 100.0), "base": ("float", 0.1, 0.9)},
    ),
    _spec(
        "fastap",
        "directly optimises a histogram approximation of average precision",
        {"num_bins": 10},
        "Cakir et al., Deep Metric Learning to Rank (FastAP), CVPR 2019",
        _pair_builder(pml.FastAPLoss),
        search_space={"num_bins": ("int", 5, 50)},
    ),
    _spec(
        "snr",
        "contrastive loss on the signal-to-noise-ratio distance; optional zero-mean regulariser",
        {"pos_margin": 0.0, "neg_margin": 1.0, "zero_mean_weight": 0.0},
        "Yuan et al., Signal-to-Noise Ratio, CVPR 2019",
        _build_snr,
        search_space={"pos_margin": ("float", 0.0, 0.5), "neg_margin": ("float", 0.3, 1.5)},
    ),
    _spec(
        "ranked_list",
        "positives inside a class hypersphere (alpha - margin), negatives beyond alpha, weighted by violation",
        {"margin": 0.2, "alpha": 1.4, "neg_temperature": 10.0, "pos_temperature": 0.0, "imbalance": 0.5},
        "Wang et al., Ranked List Loss, CVPR 2019 (defaults: the authors' CUB-200 configuration)",
        _build_ranked_list,
        accepts_miner=False,
        search_space={
            "margin": ("float", 0.1, 0.6),
            "alpha": ("float", 0.8, 1.6),
            "neg_temperature": ("log", 1.0, 20.0),
        },
    ),
    _spec(
        "group_loss",
        "replicator dynamics over batch Pearson correlations refine a classifier head's priors; cross-entropy",
        {"temperature": 24.0, "num_anchors": 2, "iterations": 1, "ce_weight": 1.0},
        "Elezi et al., The Group Loss for Deep Metric Learning, ECCV 2020 (defaults: dvl-tum/group_loss, CUB-200)",
        _build_group_loss,
        accepts_miner=False,
        search_space={
            "temperature": ("log", 1.0, 100.0),
            "num_anchors": ("int", 0, 3),
            "iterations": ("int", 1, 5),
        },
    ),
    _spec(
        "prototypical",
        "episodic: queries softmax over -squared distances to class means of the batch's support halves",
        {"temperature": 1.0},
        "Snell, Swersky & Zemel, Prototypical Networks, NeurIPS 2017",
        _build_prototypical,
        accepts_miner=False,
        search_space={"temperature": ("log", 0.01, 1.0)},
    ),
    _spec(
        "facility_location",
        "structured hinge: ground-truth medoids vs greedy loss-augmented clustering (facility location + NMI)",
        {"gamma": 1.0, "pam_iterations": 5},
        "Oh Song et al., Deep Metric Learning via Facility Location, CVPR 2017",
        _build_facility_location,
        accepts_miner=False,
        search_space={"gamma": ("log", 0.1, 10.0)},
    ),
):
    register_loss(_spec_)
