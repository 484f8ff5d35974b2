"""The embedding model: backbones, pooling, LayerNorm, head, BatchNorm freezing, parameter groups."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import ModelConfig
from retrieval.training.model.embedding_model import EmbeddingModel, GlobalPooling, build_embedding_model
from retrieval.training.model.trunks.backbones import BACKBONES, build_backbone

# all but resnet18 run at 32 px (their trunks reduce it to 1x1) to keep the suite fast
SIZES = {"resnet18": 64}
FEATURE_DIMS = {
    "resnet18": 512,
    "resnet50": 2048,
    "densenet121": 1024,
    "mobilenet_v3_large": 960,
    "efficientnet_b0": 1280,
}


@pytest.mark.parametrize("name", ["resnet18", "resnet50", "densenet121", "mobilenet_v3_large", "efficientnet_b0"])
def test_each_family_gives_unit_norm_embeddings(name: str) -> None:
    torch.manual_seed(0)
    config = ModelConfig(backbone=name, embedding_dim=24, pooling="avgmax", layer_norm=True)
    model = build_embedding_model(config).eval()
    assert model.feature_dim == FEATURE_DIMS[name]
    size = SIZES.get(name, 32)
    with torch.no_grad():
        out = model(torch.randn(2, 3, size, size))
    assert out.shape == (2, 24) and out.dtype == torch.float32
    np.testing.assert_allclose(out.norm(dim=1).numpy(), 1.0, atol=1e-5)
    assert model.embedding_dim == 24 and model.backbone_name == name


def test_registry_covers_required_backbones() -> None:
    required = {"resnet18", "resnet34", "resnet50", "densenet121", "mobilenet_v3_large", "mobilenet_v3_small"}
    assert required <= set(BACKBONES.names())
    _, dim = build_backbone("resnet34")
    assert dim == 512


def test_unknown_backbone_lists_known_names() -> None:
    with pytest.raises(ConfigError) as error:
        build_embedding_model(ModelConfig(backbone="resnet19"))
    message = str(error.value)
    assert "resnet19" in message
    assert all(name in message for name in BACKBONES.names())


def test_pooling_by_hand() -> None:
    fmap = torch.tensor([[[[1.0, 2.0], [3.0, 6.0]], [[-4.0, 0.0], [-2.0, -2.0]]]])  # (1, 2, 2, 2)
    assert GlobalPooling("avg")(fmap).tolist() == [[3.0, -2.0]]
    assert GlobalPooling("max")(fmap).tolist() == [[6.0, 0.0]]
    assert GlobalPooling("avgmax")(fmap).tolist() == [[9.0, -2.0]]


@pytest.mark.parametrize("mode", ["avg", "max", "avgmax"])
def test_model_pooling_matches_numpy(mode: str) -> None:
    fmap = torch.randn(3, 5, 4, 6, generator=torch.Generator().manual_seed(1))
    model = EmbeddingModel(nn.Identity(), 5, backbone_name="identity", pooling=mode, embedding_dim=None)
    flat = fmap.numpy().reshape(3, 5, -1)
    pooled = {"avg": flat.mean(-1), "max": flat.max(-1), "avgmax": flat.mean(-1) + flat.max(-1)}[mode]
    expected = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    np.testing.assert_allclose(model(fmap).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    assert model.embedding_dim == 5


def test_unknown_pooling_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="avgmax"):
        GlobalPooling("gem")  # type: ignore[arg-type]


def test_layer_norm_has_no_parameters_and_standardises() -> None:
    model = EmbeddingModel(nn.Identity(), 8, backbone_name="identity", pooling="avg", layer_norm=True, embedding_dim=4)
    assert list(model.norm.parameters()) == []
    assert {id(p) for p in model.new_parameters()} == {id(model.head.weight), id(model.head.bias)}
    fmap = torch.randn(4, 8, 3, 3) * 7.0 + 3.0
    normed = model.norm(model.pool(fmap)).detach().numpy()
    np.testing.assert_allclose(normed.mean(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(normed.var(axis=1), 1.0, atol=1e-3)  # LayerNorm uses the biased variance


def test_no_head_means_pooled_features_are_the_embedding() -> None:
    config = ModelConfig(backbone="mobilenet_v3_small", embedding_dim=None, layer_norm=False)
    model = build_embedding_model(config).eval()
    assert list(model.new_parameters()) == []
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        out = model(images)
        pooled = model.backbone(images).mean(dim=(2, 3))
    assert out.shape == (2, 576) and model.embedding_dim == 576
    np.testing.assert_allclose(out.numpy(), torch.nn.functional.normalize(pooled).numpy(), atol=1e-6)


def _batchnorm_state(model: EmbeddingModel) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.backbone.state_dict().items() if "running" in k or "num_batches" in k}


@pytest.mark.parametrize("freeze", [True, False])
def test_freeze_batchnorm_keeps_running_stats(freeze: bool) -> None:
    torch.manual_seed(0)
    config = ModelConfig(backbone="resnet18", embedding_dim=8, layer_norm=False, freeze_batchnorm=freeze)
    model = build_embedding_model(config)
    before = _batchnorm_state(model)
    model.train()
    model.set_backbone_trainable(True)
    model(torch.randn(4, 3, 64, 64) * 3 + 1).sum().backward()
    after = _batchnorm_state(model)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    bn = model.backbone.bn1
    assert model.training and model.head.training
    if freeze:
        assert changed == [] and not bn.training
        assert not bn.weight.requires_grad and bn.weight.grad is None
        assert model.backbone.conv1.weight.grad is not None
    else:
        assert changed and bn.training and bn.weight.grad is not None


def test_parameter_groups_partition_the_model() -> None:
    model = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=16, layer_norm=True))
    new = {id(p) for p in model.new_parameters()}
    backbone = {id(p) for p in model.backbone_parameters()}
    assert new and backbone and not new & backbone
    assert new | backbone == {id(p) for p in model.parameters()}


def test_set_backbone_trainable_toggles_only_the_backbone() -> None:
    model = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=16))
    model.set_backbone_trainable(False)
    assert not any(p.requires_grad for p in model.backbone_parameters())
    assert all(p.requires_grad for p in model.new_parameters())
    model.set_backbone_trainable(True)
    assert all(p.requires_grad for p in model.parameters())


def test_channels_last_input_gives_same_embeddings() -> None:
    torch.manual_seed(0)
    model = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=16, pooling="avgmax")).eval()
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        reference = model(images)
        model = model.to(memory_format=torch.channels_last)
        out = model(images.contiguous(memory_format=torch.channels_last))
    np.testing.assert_allclose(out.numpy(), reference.numpy(), atol=1e-5)
