"""The pair/triplet losses (pytorch-metric-learning), registered with their defaults.

They learn from relations inside one batch, so they want class-balanced C x M batches
and, under torchrun, the batch gathered from all ranks. Distances are pml's defaults
(Euclidean on unit vectors unless the loss is similarity-based).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytorch_metric_learning import losses as pml
from pytorch_metric_learning.miners import BaseMiner
from pytorch_metric_learning.regularizers import ZeroMeanRegularizer

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses.npairs import build_npairs
from retrieval.training.losses.pml_adapter import PmlPairLoss
from retrieval.training.losses.registry import LossSpec, register_loss

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


def _spec(
    name: str,
    description: str,
    params: dict[str, Any],
    paper: str,
    builder: Callable[..., PmlPairLoss],
    miner: str | None = None,
    **extra: Any,
) -> LossSpec:
    return LossSpec(
        name=name,
        description=description,
        sampler="balanced",
        default_params=params,
        default_miner=miner,
        paper=paper,
        builder=builder,
        family="pair",
        **extra,
    )


for _spec_ in (
    _spec(
        "contrastive",
        "pull positive pairs together, push negatives beyond a margin",
        {"pos_margin": 0.0, "neg_margin": 1.0},
        "Hadsell, Chopra & LeCun, CVPR 2006",
        _pair_builder(pml.ContrastiveLoss),
    ),
    _spec(
        "triplet",
        "anchor closer to its positive than to a negative by a margin; semi-hard mining",
        {"margin": 0.2, "mining": "semihard"},
        "Schroff et al., FaceNet, CVPR 2015",
        _build_triplet,
        miner="semi_hard_triplet",
        choose_default_miner=_triplet_miner,
    ),
    _spec(
        "lifted_structure",
        "each positive pair against all negatives of both ends (smooth hinge)",
        {"neg_margin": 1.0, "pos_margin": 0.0},
        "Oh Song et al., CVPR 2016",
        _pair_builder(pml.LiftedStructureLoss),
    ),
    _spec(
        "npairs",
        "softmax over one positive and N-1 negatives per anchor (one pair per class), cosines / temperature",
        {"temperature": 0.05},
        "Sohn, NeurIPS 2016",
        build_npairs,
    ),
    _spec(
        "ntxent",
        "InfoNCE / NT-Xent: softmax of positive similarity over negatives at a temperature",
        {"temperature": 0.07},
        "Chen et al., SimCLR, ICML 2020 (supervised pairs)",
        _pair_builder(pml.NTXentLoss),
    ),
    _spec(
        "angular",
        "bounds the angle at the negative of the anchor-positive-negative triangle",
        {"alpha": 40.0},
        "Wang et al., Deep Metric Learning with Angular Loss, ICCV 2017",
        _pair_builder(pml.AngularLoss),
    ),
    _spec(
        "margin",
        "positives within beta - margin, negatives beyond beta + margin; distance-weighted sampling",
        {"margin": 0.2, "beta": 1.2, "nu": 0.0, "learn_beta": True, "class_specific_beta": False},
        "Wu et al., Sampling Matters in Deep Embedding Learning, ICCV 2017",
        _build_margin,
        miner="distance_weighted",
    ),
    _spec(
        "multi_similarity",
        "self, positive and negative relative similarities weighted jointly; MS mining",
        {"alpha": 2.0, "beta": 50.0, "base": 0.5},
        "Wang et al., Multi-Similarity Loss, CVPR 2019",
        _pair_builder(pml.MultiSimilarityLoss),
        miner="multi_similarity",
    ),
    _spec(
        "fastap",
        "directly optimises a histogram approximation of average precision",
        {"num_bins": 10},
        "Cakir et al., Deep Metric Learning to Rank (FastAP), CVPR 2019",
        _pair_builder(pml.FastAPLoss),
    ),
    _spec(
        "snr",
        "contrastive loss on the signal-to-noise-ratio distance; optional zero-mean regulariser",
        {"pos_margin": 0.0, "neg_margin": 1.0, "zero_mean_weight": 0.0},
        "Yuan et al., Signal-to-Noise Ratio, CVPR 2019",
        _build_snr,
    ),
):
    register_loss(_spec_)
