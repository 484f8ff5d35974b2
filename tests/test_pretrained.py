"""Pretrained weights: files written here load into the backbone; bad files and a cold cache fail clearly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torchvision

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import ModelConfig
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model
from retrieval.training.model.pretrained import load_pretrained, torchvision_cache_path
from retrieval.training.model.trunks.backbones import BACKBONES, build_backbone


def _model(backbone: str = "resnet18") -> EmbeddingModel:
    return build_embedding_model(ModelConfig(backbone=backbone, embedding_dim=8, layer_norm=False))


def _perturbed_resnet18_state() -> dict[str, torch.Tensor]:
    torch.manual_seed(3)
    state = torchvision.models.resnet18(weights=None).state_dict()
    for key, value in state.items():
        if value.is_floating_point():
            state[key] = value + torch.rand_like(value)  # differs from any fresh random init
    return state


def _assert_backbone_equals(model: EmbeddingModel, state: dict[str, torch.Tensor]) -> None:
    for key, value in model.backbone.state_dict().items():
        assert torch.equal(value, state[key]), key


@pytest.fixture
def empty_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh torch hub dir, and any download attempt fails the test."""
    previous = torch.hub.get_dir()
    torch.hub.set_dir(str(tmp_path / "hub"))

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("load_pretrained tried to download")

    monkeypatch.setattr(torch.hub, "download_url_to_file", no_download)
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", no_download)
    yield tmp_path / "hub"
    torch.hub.set_dir(previous)


def test_torchvision_state_dict_file_loads(tmp_path: Path) -> None:
    state = _perturbed_resnet18_state()
    path = tmp_path / "resnet18-f37072fd.pth"
    torch.save(state, path)
    model = _model()
    head_before = model.head.weight.clone()
    report = load_pretrained(model, str(path))
    _assert_backbone_equals(model, state)
    assert torch.equal(model.head.weight, head_before)
    assert (report.loaded, report.missing, report.unexpected) == (len(state) - 2, 0, 2)  # fc.weight, fc.bias


def test_checkpoint_dicts_load(tmp_path: Path) -> None:
    state = _perturbed_resnet18_state()
    wrapped = {"module." + key: value for key, value in state.items()}
    torch.save({"state_dict": wrapped, "epoch": 7}, tmp_path / "lightning.ckpt")
    model = _model()
    load_pretrained(model, str(tmp_path / "lightning.ckpt"))
    _assert_backbone_equals(model, state)

    # one of our own checkpoints: "model" holds an EmbeddingModel state dict (backbone.*, head.*)
    source = _model()
    torch.save({"model": source.state_dict(), "epoch": 1}, tmp_path / "best.pt")
    target = _model()
    report = load_pretrained(target, str(tmp_path / "best.pt"))
    _assert_backbone_equals(target, source.backbone.state_dict())
    assert report.missing == 0 and report.unexpected == 2  # head.weight, head.bias


def test_legacy_densenet_keys_are_renamed(tmp_path: Path) -> None:
    state = torchvision.models.densenet121(weights=None).state_dict()
    # torchvision's published DenseNet files spell "norm1" as "norm.1" (pre-0.3 names)
    legacy = {key.replace(".norm1.", ".norm.1.").replace(".conv2.", ".conv.2."): v + 1 for key, v in state.items()}
    assert legacy.keys() != state.keys()
    torch.save(legacy, tmp_path / "densenet121-a639ec97.pth")
    model = _model("densenet121")
    report = load_pretrained(model, str(tmp_path / "densenet121-a639ec97.pth"))
    assert report.missing == 0
    key = "features.denseblock1.denselayer1.norm1.weight"
    assert torch.equal(model.backbone.state_dict()[key], state[key] + 1)


def test_shape_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    state = _perturbed_resnet18_state()
    state["layer1.0.conv1.weight"] = torch.zeros(64, 64, 1, 1)
    torch.save(state, tmp_path / "bad.pth")
    expected = (
        r"1 tensors have other shapes, first layer1\.0\.conv1\.weight \(64, 64, 1, 1\) in the file but \(64, 64, 3"
    )
    with pytest.raises(ConfigError, match=expected):
        load_pretrained(_model(), str(tmp_path / "bad.pth"))


def test_file_of_another_architecture_is_rejected(tmp_path: Path) -> None:
    torch.save(torchvision.models.mobilenet_v3_small(weights=None).state_dict(), tmp_path / "mnv3.pth")
    with pytest.raises(ConfigError, match="no tensor .* matches the resnet18 backbone"):
        load_pretrained(_model(), str(tmp_path / "mnv3.pth"))


def test_missing_corrupt_and_non_state_dict_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_pretrained(_model(), str(tmp_path / "nope.pth"))
    (tmp_path / "corrupt.pth").write_bytes(b"not a torch file at all")
    with pytest.raises(ConfigError, match="cannot read pretrained weights"):
        load_pretrained(_model(), str(tmp_path / "corrupt.pth"))
    torch.save([torch.zeros(3)], tmp_path / "list.pth")
    with pytest.raises(ConfigError, match="is not a state dict"):
        load_pretrained(_model(), str(tmp_path / "list.pth"))


def test_torchvision_source_with_empty_cache_errors_without_network(empty_hub: Path) -> None:
    expected = empty_hub / "checkpoints" / "resnet18-f37072fd.pth"
    assert torchvision_cache_path("resnet18") == expected
    with pytest.raises(ConfigError) as error:
        load_pretrained(_model(), "torchvision")
    assert "resnet18-f37072fd.pth" in str(error.value) and str(expected.parent) in str(error.value)
    assert "--pretrained PATH" in str(error.value)


def test_torchvision_source_reads_the_local_cache(empty_hub: Path) -> None:
    state = _perturbed_resnet18_state()
    (empty_hub / "checkpoints").mkdir(parents=True)
    torch.save(state, empty_hub / "checkpoints" / "resnet18-f37072fd.pth")
    model = _model()
    report = load_pretrained(model, "torchvision")
    _assert_backbone_equals(model, state)
    assert report.missing == 0


@pytest.mark.parametrize("name", [n for n in BACKBONES.names() if BACKBONES.get(n).weights == "torchvision"])
def test_backbone_keys_are_torchvision_keys(name: str) -> None:
    """Every registered trunk keeps torchvision's names and shapes, so ImageNet files load into it."""
    reference = torchvision.models.get_model(name, weights=None).state_dict()
    backbone, _ = build_backbone(name)
    ours = backbone.state_dict()
    assert all(reference[key].shape == value.shape for key, value in ours.items())
    assert {key.split(".")[0] for key in set(reference) - set(ours)} <= {"fc", "classifier"}
