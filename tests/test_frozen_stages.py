"""Frozen first stages: the trunk split into stages, the frozen prefix in onnxruntime, the activation cache.

What must hold: running the stages in order IS the trunk; frozen stages get no gradient and keep
their BatchNorm statistics; onnxruntime's prefix equals torch's; and a step on cached activations
computes the same loss as the same step on the images (float16 storage: to about 1e-3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import DataConfig, ModelConfig
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset, label_index
from retrieval.training.data_pipeline.transforms import build_train_transform
from retrieval.training.losses import build_loss
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.model.trunks.trunk_stages import trunk_stages
from retrieval.training.run.inputs.activation_cache import ActivationCache, check_cache_size, repeated_transform
from retrieval.training.run.inputs.frozen_prefix import FrozenPrefix

BACKBONES = ["resnet18", "mobilenet_v3_small", "efficientnet_lite0", "densenet121"]


@pytest.mark.parametrize("backbone", BACKBONES)
def test_stages_in_order_are_the_trunk(backbone: str) -> None:
    torch.manual_seed(0)
    model = build_embedding_model(ModelConfig(backbone=backbone, embedding_dim=8)).eval()
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        whole = model.backbone(images)
        for start in (1, len(trunk_stages(model.backbone)) // 2):
            torch.testing.assert_close(model.trunk_from(model.prefix(images, start), start), whole)
            torch.testing.assert_close(model(model.prefix(images, start), start), model(images))


def test_frozen_stages_get_no_gradient_and_keep_batchnorm_statistics() -> None:
    torch.manual_seed(0)
    model = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=8, frozen_stages=2)).train()
    stem, layer1 = trunk_stages(model.backbone)[:2]
    before = {k: v.clone() for k, v in layer1.state_dict().items()}
    model(torch.randn(4, 3, 32, 32)).sum().backward()
    assert all(p.grad is None and not p.requires_grad for p in [*stem.parameters(), *layer1.parameters()])
    assert all(p.grad is not None for p in trunk_stages(model.backbone)[2].parameters())
    assert not model.backbone.bn1.training and not layer1.training and model.backbone.layer2.training
    for key, value in layer1.state_dict().items():  # running means did not move in train mode
        torch.testing.assert_close(value, before[key])
    model.set_backbone_trainable(True)  # the warm-start switch must not unfreeze them
    assert not any(p.requires_grad for p in layer1.parameters())


def test_too_many_frozen_stages_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="has 5 stages and at least one must train"):
        build_embedding_model(ModelConfig(backbone="resnet18", frozen_stages=5))


@pytest.mark.parametrize("backbone", ["resnet18", "efficientnet_lite0"])
def test_onnxruntime_prefix_equals_torch(backbone: str) -> None:
    torch.manual_seed(0)
    model = build_embedding_model(ModelConfig(backbone=backbone, embedding_dim=8, frozen_stages=3))
    model.train()
    images = torch.randn(3, 3, 64, 64)
    prefix = FrozenPrefix(model, torch.device("cpu"))
    assert prefix.uses_onnxruntime
    fast = prefix(images)
    with torch.no_grad():
        expected = model.prefix(images)
    torch.testing.assert_close(fast, expected, atol=1e-4, rtol=1e-4)
    assert model.training and model.head.training  # exporting the prefix left the training model in train mode


def test_cached_views_give_the_loss_of_the_same_images(synth_data: Path) -> None:
    """The same augmented views through the whole model and through the cache: the same loss."""
    torch.manual_seed(0)
    model = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=16, frozen_stages=2))
    records = _records(synth_data)[:24]
    index = label_index(records)
    views = 3
    transform = repeated_transform(build_train_transform(DataConfig(image_size=32), "resnet18"), views)
    drawn = ImageRecordDataset(records, index, transform)
    images = torch.stack([drawn[i][0] for i in range(len(drawn))])  # (24, views, 3, 32, 32), drawn once
    cache = ActivationCache.build(
        _Fixed(images, drawn.labels),
        FrozenPrefix(model, torch.device("cpu")),
        views=views,
        seed=0,
        workers=0,
        progress=False,
    )
    assert tuple(cache.activations.shape[:2]) == (24, views)
    loss = build_loss("normalized_softmax", num_classes=len(index), embedding_dim=16)
    rows, epoch = list(range(0, 24, 2)), 5
    labels = torch.tensor([drawn.labels[i] for i in rows])
    chosen_view = torch.as_tensor((cache._offsets[rows] + epoch) % views)
    model.eval()
    with torch.no_grad():
        from_images = loss(model(images[torch.tensor(rows), chosen_view]), labels)
        from_cache = loss(model(cache.batch(rows, epoch), model.frozen_stages), labels)
    assert abs(from_images.item() - from_cache.item()) < 2e-3 * abs(from_images.item())


class _Fixed(torch.utils.data.Dataset):
    """Views drawn beforehand, served as ImageRecordDataset serves them: (views, label, index)."""

    def __init__(self, images: torch.Tensor, labels: list[int]) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, int]:
        return self.images[index], self.labels[index], index


def test_each_view_once_every_k_epochs() -> None:
    cache = ActivationCache(torch.arange(5 * 4, dtype=torch.float16).reshape(5, 4, 1, 1, 1), seed=3)
    seen = np.stack([cache.batch(range(5), epoch).flatten().numpy() for epoch in range(1, 5)])
    for image in range(5):
        assert sorted(seen[:, image] - 4 * image) == [0, 1, 2, 3]


def test_a_cache_too_large_is_refused_with_what_to_change() -> None:
    with pytest.raises(ConfigError, match="lower trainer.cached_views, raise model.frozen_stages"):
        check_cache_size(10_000, 16, (40, 28, 28), limit_gb=8)
    assert check_cache_size(100, 2, (40, 28, 28), limit_gb=8) == 100 * 2 * 40 * 28 * 28 * 2


def _records(data: Path) -> list:
    from retrieval.indexing.data.sources import load_records

    return load_records(data)
