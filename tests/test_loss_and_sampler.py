"""The one factory from a config to the loss, the sampler kind and an epoch's steps (trainer and study)."""

from __future__ import annotations

import pytest
import torch

from retrieval.training.config.loss_and_sampler import capped_steps, loss_from_config, sampler_kind
from retrieval.training.config.train_config import build_config
from retrieval.training.losses import build_loss


def test_the_loss_is_the_configs_name_parameters_and_miner() -> None:
    cfg = build_config([("o", {"loss": {"name": "triplet", "params": {"margin": 0.3}, "miner": "none"}})])
    embeddings = torch.nn.functional.normalize(torch.randn(8, 4, generator=torch.Generator().manual_seed(0)), dim=1)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    built = loss_from_config(cfg, num_classes=4, embedding_dim=4)(embeddings, labels)
    by_hand = build_loss("triplet", num_classes=4, embedding_dim=4, params={"margin": 0.3}, miner="none")
    assert torch.allclose(built, by_hand(embeddings, labels))
    other_margin = build_loss("triplet", num_classes=4, embedding_dim=4, params={"margin": 0.05}, miner="none")
    assert not torch.allclose(built, other_margin(embeddings, labels))  # the parameters reached the loss


@pytest.mark.parametrize(
    ("loss", "sampler", "kind"),
    [
        ("normalized_softmax", "auto", "shuffle"),  # a classification loss shuffles
        ("triplet", "auto", "balanced"),  # a pair loss needs C x M batches
        ("triplet", "shuffle", "shuffle"),  # an explicit choice stands
        ("normalized_softmax", "balanced", "balanced"),
    ],
)
def test_auto_sampler_is_the_losss_own(loss: str, sampler: str, kind: str) -> None:
    assert sampler_kind(build_config([("o", {"loss": {"name": loss}, "data": {"sampler": sampler}})])) == kind


def test_steps_are_capped_by_max_steps_per_epoch() -> None:
    capped = build_config([("o", {"trainer": {"max_steps_per_epoch": 3}})])
    assert (capped_steps(10, capped), capped_steps(2, capped), capped_steps(10, build_config([]))) == (3, 2, 10)
