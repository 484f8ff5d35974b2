"""The loss and miner registries: names, params, miners, samplers, error sentences."""

from __future__ import annotations

import pytest
import torch
from pytorch_metric_learning import miners as pml_miners

from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.training.losses import (
    EmbeddingLoss,
    LossSpec,
    available_losses,
    available_miners,
    build_loss,
    build_miner,
    get_loss_spec,
    register_loss,
)

REQUIRED_LOSSES = {
    "contrastive",
    "triplet",
    "lifted_structure",
    "npairs",
    "ntxent",
    "angular",
    "margin",
    "multi_similarity",
    "proxy_nca",
    "proxy_anchor",
    "normalized_softmax",
    "cosface",
    "arcface",
    "soft_triple",
    "fastap",
    "snr",
    "ranked_list",
    "group_loss",
    "prototypical",
    "proxy_triplet",
    "facility_location",
}
PROXY_LOSSES = {"proxy_nca", "proxy_anchor", "normalized_softmax", "cosface", "arcface", "soft_triple", "proxy_triplet"}
# pair-family losses that own parameters: the margin loss learns beta (Wu et al.), Group Loss a classifier head
PAIR_LOSSES_WITH_PARAMETERS = {"margin", "group_loss"}


def test_all_required_losses_are_registered_and_sorted():
    names = [spec.name for spec in available_losses()]
    assert set(names) == REQUIRED_LOSSES
    assert names == sorted(names)


def test_required_miners_are_registered():
    assert available_miners() == sorted(
        ["semi_hard_triplet", "hard_triplet", "multi_similarity", "distance_weighted", "pair_margin"]
    )


@pytest.mark.parametrize("spec", available_losses(), ids=lambda s: s.name)
def test_spec_metadata_and_sampler_match_the_family(spec: LossSpec):
    assert spec.description.strip() and "\n" not in spec.description
    assert spec.paper.strip()
    loss = build_loss(spec.name, num_classes=6, embedding_dim=8)
    is_proxy = spec.name in PROXY_LOSSES
    assert spec.family == ("proxy" if is_proxy else "pair")
    assert spec.sampler == ("shuffle" if is_proxy else "balanced") == type(loss).sampler
    assert isinstance(loss, EmbeddingLoss)
    has_parameters = is_proxy or spec.name in PAIR_LOSSES_WITH_PARAMETERS
    assert (len(loss.loss_parameters()) > 0) is has_parameters


def test_unknown_loss_lists_the_known_ones():
    with pytest.raises(ConfigError) as error:
        get_loss_spec("tripplet")
    message = str(error.value)
    assert "unknown loss 'tripplet'" in message
    assert message.endswith("known losses: " + ", ".join(sorted(REQUIRED_LOSSES)))


def test_unknown_param_is_rejected_by_name_with_the_accepted_ones():
    with pytest.raises(ConfigError, match=r"no parameter 'temprature'.*class_ratio, temperature"):
        build_loss("normalized_softmax", num_classes=4, embedding_dim=8, params={"temprature": 0.1})


def test_param_of_the_wrong_kind_is_rejected():
    with pytest.raises(ConfigError, match="'margin' must be a number"):
        build_loss("triplet", num_classes=4, embedding_dim=8, params={"margin": "0.2"})
    with pytest.raises(ConfigError, match="'learn_beta' must be a bool"):
        build_loss("margin", num_classes=4, embedding_dim=8, params={"learn_beta": 1})


def test_params_override_defaults():
    loss = build_loss("proxy_anchor", num_classes=4, embedding_dim=8, params={"margin": 0.3, "alpha": 16})
    assert loss.loss.margin == 0.3 and loss.loss.alpha == 16
    default = build_loss("proxy_anchor", num_classes=4, embedding_dim=8)
    assert default.loss.margin == 0.1 and default.loss.alpha == 32


def test_bad_values_are_config_errors():
    for ratio in (0.0, 1.5):
        with pytest.raises(ConfigError, match="class_ratio must be in"):
            build_loss("normalized_softmax", num_classes=4, embedding_dim=8, params={"class_ratio": ratio})
    with pytest.raises(ConfigError, match="triplet mining must be one of"):
        build_loss("triplet", num_classes=4, embedding_dim=8, params={"mining": "hardest"})
    with pytest.raises(ConfigError, match="triplet mining must be one of"):
        build_loss("triplet", num_classes=4, embedding_dim=8, params={"mining": "hardest"}, miner="hard_triplet")
    with pytest.raises(ConfigError, match="type_of_triplets must be one of"):
        build_miner("semi_hard_triplet", {"type_of_triplets": "medium"})


def _miner(loss) -> pml_miners.BaseMiner | None:
    return loss.miner


def test_default_miners_follow_the_papers():
    triplet = build_loss("triplet", num_classes=4, embedding_dim=8)
    assert isinstance(_miner(triplet), pml_miners.TripletMarginMiner)
    assert _miner(triplet).type_of_triplets == "semihard" and _miner(triplet).margin == 0.2
    margin = build_loss("margin", num_classes=4, embedding_dim=8)
    assert isinstance(_miner(margin), pml_miners.DistanceWeightedMiner)
    ms = build_loss("multi_similarity", num_classes=4, embedding_dim=8)
    assert isinstance(_miner(ms), pml_miners.MultiSimilarityMiner) and _miner(ms).epsilon == 0.1
    assert _miner(build_loss("contrastive", num_classes=4, embedding_dim=8)) is None
    assert _miner(build_loss("multi_similarity", num_classes=4, embedding_dim=8, miner=None)) is None
    assert _miner(build_loss("margin", num_classes=4, embedding_dim=8, miner="none")) is None


def test_hard_triplet_mining_is_selectable_three_ways():
    by_param = build_loss("triplet", num_classes=4, embedding_dim=8, params={"mining": "hard", "margin": 0.1})
    by_name = build_loss("triplet", num_classes=4, embedding_dim=8, miner="hard_triplet")
    by_miner_params = build_loss("triplet", num_classes=4, embedding_dim=8, miner_params={"type_of_triplets": "hard"})
    for loss in (by_param, by_name, by_miner_params):
        assert _miner(loss).type_of_triplets == "hard"
    assert by_param.miner.margin == 0.1  # the loss margin is passed on to its default miner
    assert _miner(build_loss("triplet", num_classes=4, embedding_dim=8, params={"mining": "all"})) is None


def test_any_pair_loss_takes_any_miner():
    loss = build_loss(
        "contrastive", num_classes=4, embedding_dim=8, miner="pair_margin", miner_params={"neg_margin": 0.5}
    )
    assert isinstance(loss.miner, pml_miners.PairMarginMiner) and loss.miner.neg_margin == 0.5


def test_miner_errors():
    with pytest.raises(
        ConfigError,
        match=r"unknown miner 'semihard'; did you mean semi_hard_triplet\? known miners: distance_weighted, hard_triplet",
    ):
        build_loss("triplet", num_classes=4, embedding_dim=8, miner="semihard")
    with pytest.raises(
        ConfigError, match="miner 'multi_similarity' has no parameter 'eps'; accepted parameters: epsilon"
    ):
        build_loss("multi_similarity", num_classes=4, embedding_dim=8, miner_params={"eps": 0.2})
    with pytest.raises(ConfigError, match="does not use a miner"):
        build_loss("normalized_softmax", num_classes=4, embedding_dim=8, miner="pair_margin")
    with pytest.raises(ConfigError, match="uses no miner"):
        build_loss("contrastive", num_classes=4, embedding_dim=8, miner_params={"pos_margin": 0.1})


def test_labels_outside_the_built_classes_are_a_data_error():
    loss = build_loss("proxy_anchor", num_classes=3, embedding_dim=4)
    embeddings = torch.nn.functional.normalize(torch.randn(4, 4), dim=1)
    with pytest.raises(DataError, match=r"label 3 is outside \[0, 3\)"):
        loss(embeddings, torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="labels must be a"):
        loss(embeddings, torch.tensor([0, 1]))


def test_registering_a_loss_that_owns_a_classifier_head(monkeypatch):
    """The interface admits a loss that needs class logits and the whole batch (Group Loss)."""
    from retrieval.training.losses import registry

    class HeadAndBatchLoss(EmbeddingLoss):
        sampler = "balanced"

        def __init__(self, num_classes: int, embedding_dim: int, weight: float):
            super().__init__(num_classes=num_classes)
            self.head = torch.nn.Linear(embedding_dim, num_classes)
            self.weight = weight

        def compute(self, embeddings, labels):
            similarity = embeddings @ embeddings.T
            logits = self.head(embeddings)
            return torch.nn.functional.cross_entropy(logits, labels) + self.weight * similarity.mean()

    monkeypatch.setattr(registry.LOSSES, "_entries", dict(registry.LOSSES._entries))
    register_loss(
        LossSpec(
            "head_and_batch",
            "test loss",
            "balanced",
            {"weight": 0.5},
            None,
            "none",
            lambda num_classes, embedding_dim, miner, weight: HeadAndBatchLoss(num_classes, embedding_dim, weight),
            accepts_miner=False,
        )
    )
    loss = build_loss("head_and_batch", num_classes=3, embedding_dim=4, params={"weight": 0.25})
    assert loss.weight == 0.25 and len(loss.loss_parameters()) == 2
    with pytest.raises(ValueError, match="already registered"):
        register_loss(get_loss_spec("head_and_batch"))
