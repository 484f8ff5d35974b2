"""The proxy/classification losses, registered with their papers' defaults.

Each compares a sample with learned per-class vectors (proxies, class weights or
SoftTriple centres), which are the loss parameters: the trainer gives them their own
learning rate and saves them in checkpoints. Plain shuffled batches suffice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytorch_metric_learning import losses as pml
from pytorch_metric_learning.miners import BaseMiner

from retrieval.training.losses.native.normalized_softmax import NormalizedSoftmaxLoss
from retrieval.training.losses.native.proxy_triplet import ProxyTripletLoss
from retrieval.training.losses.pml_adapter import PmlProxyLoss
from retrieval.training.losses.registry import family_spec, register_loss


def _proxy_builder(pml_class: type[pml.BaseMetricLossFunction]) -> Callable[..., PmlProxyLoss]:
    """A builder that creates the pml loss with (num_classes, embedding_size) and params."""

    def build(*, num_classes: int, embedding_dim: int, miner: BaseMiner | None, **params: Any) -> PmlProxyLoss:
        loss = pml_class(num_classes=num_classes, embedding_size=embedding_dim, **params)
        return PmlProxyLoss(loss, miner, num_classes=num_classes)

    return build


def _build_normalized_softmax(
    *, num_classes: int, embedding_dim: int, miner: BaseMiner | None, **params: Any
) -> NormalizedSoftmaxLoss:
    return NormalizedSoftmaxLoss(num_classes, embedding_dim, **params)


def _build_proxy_triplet(
    *, num_classes: int, embedding_dim: int, miner: BaseMiner | None, margin: float
) -> ProxyTripletLoss:
    return ProxyTripletLoss(num_classes, embedding_dim, margin=margin)


_spec = family_spec("proxy", "shuffle")

for _spec_ in (
    _spec(
        "proxy_nca",
        "NCA between each sample and one learned proxy per class",
        {"softmax_scale": 1.0},
        "Movshovitz-Attias et al., No Fuss Distance Metric Learning, ICCV 2017",
        _proxy_builder(pml.ProxyNCALoss),
        search_space={"softmax_scale": ("log", 1.0, 64.0)},
    ),
    _spec(
        "proxy_anchor",
        "each proxy as an anchor against all batch samples (log-sum-exp, margin)",
        {"margin": 0.1, "alpha": 32.0},
        "Kim et al., Proxy Anchor Loss, CVPR 2020",
        _proxy_builder(pml.ProxyAnchorLoss),
        search_space={"margin": ("float", 0.0, 0.5), "alpha": ("log", 4.0, 64.0)},
    ),
    _spec(
        "normalized_softmax",
        "softmax over cosines to L2-normalised class weights / temperature; class subsampling",
        {"temperature": 0.05, "class_ratio": 1.0},
        "Zhai & Wu, Classification is a Strong Baseline for DML, BMVC 2019",
        _build_normalized_softmax,
        accepts_miner=False,
        search_space={"temperature": ("log", 0.01, 0.2)},
    ),
    _spec(
        "cosface",
        "normalised softmax with an additive cosine margin on the target class",
        {"margin": 0.35, "scale": 64.0},
        "Wang et al., CosFace, CVPR 2018",
        _proxy_builder(pml.CosFaceLoss),
        search_space={"margin": ("float", 0.1, 0.5), "scale": ("log", 8.0, 64.0)},
    ),
    _spec(
        "arcface",
        "normalised softmax with an additive angular margin (degrees) on the target class",
        {"margin": 28.6, "scale": 64.0},
        "Deng et al., ArcFace, CVPR 2019",
        _proxy_builder(pml.ArcFaceLoss),
        search_space={"margin": ("float", 10.0, 40.0), "scale": ("log", 8.0, 64.0)},
    ),
    _spec(
        "soft_triple",
        "softmax over classes with several centres each (a smoothed triplet loss)",
        {"centers_per_class": 10, "la": 20.0, "gamma": 0.1, "margin": 0.01},
        "Qian et al., SoftTriple Loss, ICCV 2019",
        _proxy_builder(pml.SoftTripleLoss),
        search_space={"la": ("log", 5.0, 50.0), "gamma": ("log", 0.03, 0.5), "margin": ("float", 0.0, 0.05)},
    ),
    _spec(
        "proxy_triplet",
        "triplet margin between a sample, its class proxy and the nearest other proxy",
        {"margin": 0.1},
        "Movshovitz-Attias et al., No Fuss Distance Metric Learning, ICCV 2017 (triplet form)",
        _build_proxy_triplet,
        accepts_miner=False,
        search_space={"margin": ("float", 0.01, 0.5)},
    ),
):
    register_loss(_spec_)
