"""The proxy/classification losses' builders, registered with their rows of ``loss_table.yaml`` (their
papers' defaults).

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
from retrieval.training.losses.registry import register_family


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


register_family(
    "proxy",
    "shuffle",
    {
        "proxy_nca": _proxy_builder(pml.ProxyNCALoss),
        "proxy_anchor": _proxy_builder(pml.ProxyAnchorLoss),
        "normalized_softmax": _build_normalized_softmax,
        "cosface": _proxy_builder(pml.CosFaceLoss),
        "arcface": _proxy_builder(pml.ArcFaceLoss),
        "soft_triple": _proxy_builder(pml.SoftTripleLoss),
        "proxy_triplet": _build_proxy_triplet,
    },
)
