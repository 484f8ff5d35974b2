"""Every pml-backed loss gives the value and gradient of calling pytorch-metric-learning directly.

The reference side is written out here (class, params, miner) from the papers' defaults
listed in docs/losses.md, so a wrong default or a dropped miner in the registry fails.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses as pml
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning import regularizers as pml_regularizers
from pytorch_metric_learning.distances import DotProductSimilarity

from retrieval.training.losses import available_losses, build_loss, get_loss_spec

C, D = 5, 16


def _semi_hard(margin=0.2):
    return pml_miners.TripletMarginMiner(margin=margin, type_of_triplets="semihard")


class _CosinesOverTemperature(torch.nn.Module):
    """pml's N-pairs (no scale option) on unit embeddings times 1/sqrt(T), un-normalised: logits cos / T."""

    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.loss = pml.NPairsLoss(distance=DotProductSimilarity(normalize_embeddings=False))
        self.factor = 1 / math.sqrt(temperature)

    def forward(self, embeddings, labels, indices=None):
        return self.loss(F.normalize(embeddings, dim=1) * self.factor, labels, indices)


def _ranked_list(**params) -> pml.RankedListLoss:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pml warns about T_n > 5, which the paper uses
        return pml.RankedListLoss(**params)


# name -> (reference loss factory, reference miner factory or None, our params, our miner args)
REFERENCES = {
    "contrastive": (lambda: pml.ContrastiveLoss(pos_margin=0.0, neg_margin=1.0), None),
    "triplet": (lambda: pml.TripletMarginLoss(margin=0.2), _semi_hard),
    "lifted_structure": (lambda: pml.LiftedStructureLoss(neg_margin=1.0, pos_margin=0.0), None),
    "npairs": (lambda: _CosinesOverTemperature(0.05), None),
    "ntxent": (lambda: pml.NTXentLoss(temperature=0.07), None),
    "angular": (lambda: pml.AngularLoss(alpha=40), None),
    "margin": (
        lambda: pml.MarginLoss(margin=0.2, beta=1.2, nu=0.0, learn_beta=True),
        lambda: pml_miners.DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4),
    ),
    "multi_similarity": (
        lambda: pml.MultiSimilarityLoss(alpha=2, beta=50, base=0.5),
        lambda: pml_miners.MultiSimilarityMiner(epsilon=0.1),
    ),
    "fastap": (lambda: pml.FastAPLoss(num_bins=10), None),
    "snr": (lambda: pml.SignalToNoiseRatioContrastiveLoss(pos_margin=0.0, neg_margin=1.0), None),
    # the authors' CUB-200 configuration: negative boundary 1.4, margin 0.2, T_n 10, T_p 0
    "ranked_list": (lambda: _ranked_list(margin=0.2, Tn=10, imbalance=0.5, alpha=1.4, Tp=0), None),
    "proxy_nca": (lambda: pml.ProxyNCALoss(C, D, softmax_scale=1), None),
    "proxy_anchor": (lambda: pml.ProxyAnchorLoss(C, D, margin=0.1, alpha=32), None),
    "cosface": (lambda: pml.CosFaceLoss(C, D, margin=0.35, scale=64), None),
    "arcface": (lambda: pml.ArcFaceLoss(C, D, margin=28.6, scale=64), None),
    "soft_triple": (lambda: pml.SoftTripleLoss(C, D, centers_per_class=10, la=20, gamma=0.1, margin=0.01), None),
}

# non-default settings: (name, our params, our miner, our miner params, reference loss, reference miner)
VARIANTS = [
    (
        "triplet",
        {"margin": 0.1, "mining": "hard"},
        "default",
        None,
        lambda: pml.TripletMarginLoss(margin=0.1),
        lambda: pml_miners.TripletMarginMiner(0.1, type_of_triplets="hard"),
    ),
    ("triplet", {"mining": "all"}, "default", None, lambda: pml.TripletMarginLoss(margin=0.2), None),
    (
        "contrastive",
        {"neg_margin": 0.7},
        "pair_margin",
        {"pos_margin": 0.1},
        lambda: pml.ContrastiveLoss(neg_margin=0.7),
        lambda: pml_miners.PairMarginMiner(pos_margin=0.1, neg_margin=0.8),
    ),
    (
        "margin",
        {"learn_beta": True, "class_specific_beta": True, "nu": 0.1},
        "default",
        None,
        lambda: pml.MarginLoss(beta=1.2, nu=0.1, learn_beta=True, num_classes=C),
        lambda: pml_miners.DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4),
    ),
    ("npairs", {"temperature": 1.0}, "default", None, lambda: pml.NPairsLoss(), None),  # pml's own N-pairs
    (
        "snr",
        {"zero_mean_weight": 0.1},
        "default",
        None,
        lambda: pml.SignalToNoiseRatioContrastiveLoss(
            embedding_regularizer=pml_regularizers.ZeroMeanRegularizer(), embedding_reg_weight=0.1
        ),
        None,
    ),
    (
        "ranked_list",
        {"margin": 0.4, "alpha": 1.2, "neg_temperature": 5.0, "pos_temperature": 1.0, "imbalance": 0.3},
        "default",
        None,
        lambda: _ranked_list(margin=0.4, Tn=5, imbalance=0.3, alpha=1.2, Tp=1),
        None,
    ),
    (
        "proxy_anchor",
        {"margin": 0.2, "alpha": 16.0},
        "default",
        None,
        lambda: pml.ProxyAnchorLoss(C, D, margin=0.2, alpha=16),
        None,
    ),
]


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    embeddings = F.normalize(torch.randn(4 * 4, D, generator=generator), dim=1)
    labels = torch.tensor([0, 1, 2, 4]).repeat_interleave(4)
    return embeddings, labels


def _value_and_grad(loss_fn, embeddings: torch.Tensor, labels: torch.Tensor, seed: int):
    embeddings = embeddings.clone().requires_grad_(True)
    torch.manual_seed(seed)  # random miners (distance-weighted) draw the same triplets
    value = loss_fn(embeddings, labels)
    value.backward()
    return value.detach(), embeddings.grad


def _reference(loss, miner):
    return lambda e, y: loss(e, y, miner(e, y) if miner is not None else None)


def _compare(ours, reference_loss, reference_miner):
    reference_loss.load_state_dict(ours.loss.state_dict())  # same proxies / class weights
    embeddings, labels = _batch()
    value, grad = _value_and_grad(ours, embeddings, labels, seed=3)
    expected, expected_grad = _value_and_grad(_reference(reference_loss, reference_miner), embeddings, labels, seed=3)
    assert value.item() > 0
    torch.testing.assert_close(value, expected)
    torch.testing.assert_close(grad, expected_grad)


OUR_OWN = {"normalized_softmax", "group_loss", "prototypical", "proxy_triplet", "facility_location"}  # hand tests


def test_the_reference_table_covers_every_pml_backed_loss():
    assert set(REFERENCES) | OUR_OWN == {spec.name for spec in available_losses()}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_default_loss_equals_pml(name: str):
    make_loss, make_miner = REFERENCES[name]
    ours = build_loss(name, num_classes=C, embedding_dim=D)
    _compare(ours, make_loss(), make_miner() if make_miner else None)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v[0]}-{sorted(v[1])}")
def test_non_default_settings_equal_pml(variant):
    name, params, miner, miner_params, make_loss, make_miner = variant
    ours = build_loss(name, num_classes=C, embedding_dim=D, params=params, miner=miner, miner_params=miner_params)
    _compare(ours, make_loss(), make_miner() if make_miner else None)


def test_default_miner_name_matches_the_reference_miner():
    for name, (_, make_miner) in REFERENCES.items():
        assert (get_loss_spec(name).default_miner is None) == (make_miner is None), name
