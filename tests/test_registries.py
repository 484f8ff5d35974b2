"""Every entry of every registry builds from its defaults and works; unknown names list the known ones.

One registry shape (``retrieval.indexing.common.registry.Registry``) serves losses, miners,
backbones, optimizers, schedules, recipes, dataset layouts and faiss index kinds, so one table of
checks covers them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import faiss
import numpy as np
import pytest
import torch

from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.common.registry import Registry
from retrieval.indexing.data.sources import LAYOUTS
from retrieval.indexing.store.files.faiss_kinds import (
    BINARY_KINDS,
    FLOAT_KINDS,
    build_binary_index,
    build_float_index,
)
from retrieval.training.config.recipes import recipe_registry
from retrieval.training.config.train_config import OptimizerConfig, ScheduleConfig
from retrieval.training.losses import build_loss
from retrieval.training.losses.miners import MINERS, build_miner
from retrieval.training.losses.registry import LOSSES
from retrieval.training.model.trunks.backbones import BACKBONES, VITS
from retrieval.training.run.fitting.optim import OPTIMIZERS, SCHEDULES, build_optimizer, build_scheduler

REGISTRIES: dict[str, Registry] = {
    "loss": LOSSES,
    "miner": MINERS,
    "backbone": BACKBONES,
    "optimizer": OPTIMIZERS,
    "schedule": SCHEDULES,
    "recipe": recipe_registry(),
    "layout": LAYOUTS,
    "float kind": FLOAT_KINDS,
    "binary kind": BINARY_KINDS,
}


def _batch(classes: int = 4, per_class: int = 4, dim: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(classes).repeat_interleave(per_class)
    centres = torch.nn.functional.normalize(torch.randn(classes, dim, generator=generator), dim=1)
    noisy = centres[labels] + 0.3 * torch.randn(len(labels), dim, generator=generator)
    return torch.nn.functional.normalize(noisy, dim=1).requires_grad_(True), labels


@pytest.mark.parametrize("name", LOSSES.names())
def test_every_loss_builds_and_gives_a_finite_loss_with_gradients(name: str) -> None:
    embeddings, labels = _batch()
    loss = build_loss(name, num_classes=4, embedding_dim=16)
    value = loss(embeddings, labels)
    value.backward()
    assert value.ndim == 0 and torch.isfinite(value)
    assert embeddings.grad is not None and torch.isfinite(embeddings.grad).all()


@pytest.mark.parametrize("name", MINERS.names())
def test_every_miner_builds_and_mines_index_tuples(name: str) -> None:
    embeddings, labels = _batch()
    tuples = build_miner(name)(embeddings.detach(), labels)
    assert all(int(part.max()) < len(labels) for part in tuples if part.numel())


@pytest.mark.parametrize("name", [name for name in BACKBONES.names() if name not in VITS])
def test_every_backbone_builds_and_maps_images_to_a_feature_map(name: str) -> None:
    """Every convolutional trunk; the transformers return tokens (tests/test_vit_trunks.py)."""
    trunk, channels = BACKBONES.get(name).build()
    with torch.no_grad():
        features = trunk.eval()(torch.rand(1, 3, 64, 64))
    assert features.ndim == 4 and features.shape[1] == channels


@pytest.mark.parametrize("name", OPTIMIZERS.names())
def test_every_optimizer_builds_and_steps(name: str) -> None:
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = build_optimizer([{"params": [weight]}], OptimizerConfig(name=name, lr=0.1))
    (weight**2).sum().backward()
    optimizer.step()
    assert (weight.detach() < 1).all()


def _learning_rates(cfg: ScheduleConfig, *, steps_per_epoch: int, epochs: int) -> list[float]:
    """The learning rate of every optimizer step under ``cfg``, for a base rate of 1."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0)
    scheduler = build_scheduler(optimizer, cfg, steps_per_epoch=steps_per_epoch, epochs=epochs)
    rates = []
    for _ in range(steps_per_epoch * epochs):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


@pytest.mark.parametrize("name", SCHEDULES.names())
def test_every_schedule_builds_and_warms_up_linearly_to_the_base_rate(name: str) -> None:
    rates = _learning_rates(ScheduleConfig(name=name, warmup_epochs=1), steps_per_epoch=4, epochs=3)
    assert rates[:5] == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])  # the shape starts at the base rate
    assert all(0 < rate <= 1 for rate in rates)


def test_step_and_cosine_schedules_by_hand() -> None:
    step = _learning_rates(ScheduleConfig(name="step", step_epochs=2, step_gamma=0.1), steps_per_epoch=3, epochs=5)
    assert step == pytest.approx([1.0] * 6 + [0.1] * 6 + [0.01] * 3)
    cosine = _learning_rates(ScheduleConfig(name="cosine", min_lr_ratio=0.2), steps_per_epoch=2, epochs=2)
    # progress 0, 1/4, 1/2, 3/4: 0.2 + 0.8 * (1 + cos(pi * progress)) / 2
    assert cosine == pytest.approx([1.0, 0.2 + 0.4 * (1 + 2**-0.5), 0.6, 0.2 + 0.4 * (1 - 2**-0.5)])


@pytest.mark.parametrize(("section", "registry"), [(OptimizerConfig, OPTIMIZERS), (ScheduleConfig, SCHEDULES)])
def test_config_accepts_exactly_the_registered_names(section: type, registry: Registry) -> None:
    """The config's Literal (which gives the key-naming validation error) and the registry agree."""
    assert sorted(get_args(section.model_fields["name"].annotation)) == registry.names()


@pytest.mark.parametrize("name", LAYOUTS.names())
def test_every_layout_can_tell_whether_a_path_is_its_own(name: str, tmp_path) -> None:
    layout = LAYOUTS.get(name)
    assert layout.looks_for and callable(layout.load)
    assert layout.matches(tmp_path) is False  # an empty folder is no dataset


def _kind_cases() -> list[tuple[str, Callable[[], object]]]:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((300, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    codes = np.packbits(vectors > 0, axis=1)
    ids = np.arange(300, dtype=np.int64)

    def float_search(kind: str) -> Callable[[], object]:
        return lambda: build_float_index(FLOAT_KINDS.get(kind), vectors, ids).search(vectors[:5], 3)

    def binary_search(kind: str) -> Callable[[], object]:
        return lambda: build_binary_index(BINARY_KINDS.get(kind), codes, ids, 32).search(codes[:5], 3)

    return [(f"float:{k}", float_search(k)) for k in FLOAT_KINDS.names()] + [
        (f"binary:{k}", binary_search(k)) for k in BINARY_KINDS.names()
    ]


@pytest.mark.parametrize(("name", "search"), _kind_cases(), ids=[case[0] for case in _kind_cases()])
def test_every_faiss_kind_builds_and_returns_k_results(name: str, search: Callable[[], object]) -> None:
    faiss.omp_set_num_threads(1)
    _, ids = search()  # type: ignore[misc]
    assert ids.shape == (5, 3) and (ids >= 0).all()


@pytest.mark.parametrize("kind", REGISTRIES)
def test_an_unknown_name_lists_every_known_one(kind: str) -> None:
    registry = REGISTRIES[kind]
    with pytest.raises(RetrievalError, match="unknown") as caught:
        registry.get("no-such-entry")
    assert all(name in str(caught.value) for name in registry.names())
