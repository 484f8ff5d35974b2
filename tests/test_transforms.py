"""Train/eval transforms: eval must equal the model.json preprocessing that the torch-free index side runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.exported_model.preprocess import preprocess_image
from retrieval.training.config.train_config import DataConfig
from retrieval.training.data_pipeline.transforms import build_eval_transform, build_train_transform, eval_preprocessing

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def noise_image(width: int, height: int, seed: int = 0) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


@pytest.mark.parametrize(("image_size", "resize"), [(224, 256), (112, 128), (299, 342), (64, 73)])
def test_eval_preprocessing_resize_is_image_size_times_256_over_224(image_size, resize):
    p = eval_preprocessing(DataConfig(image_size=image_size))
    assert (p.resize, p.crop) == (resize, image_size)
    assert p.mean == IMAGENET_MEAN and p.std == IMAGENET_STD
    assert p.interpolation == "bilinear" and p.color_mode == "RGB"


def test_eval_transform_parameters_match_preprocessing():
    cfg = DataConfig(image_size=160)
    p = eval_preprocessing(cfg)
    steps = build_eval_transform(cfg).transforms
    assert [type(s) for s in steps] == [T.Resize, T.CenterCrop, T.ToTensor, T.Normalize]
    resize, crop, _, normalize = steps
    assert resize.size == p.resize and resize.interpolation == T.InterpolationMode.BILINEAR
    assert tuple(crop.size) == (p.crop, p.crop)
    assert tuple(normalize.mean) == p.mean and tuple(normalize.std) == p.std


@pytest.mark.parametrize(("width", "height"), [(300, 200), (150, 257), (97, 97)])
def test_eval_transform_equals_the_torch_free_preprocessing_of_the_index(width, height):
    cfg = DataConfig(image_size=64)
    image = noise_image(width, height)
    out = build_eval_transform(cfg)(image)
    assert out.shape == (3, 64, 64) and out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), preprocess_image(image, eval_preprocessing(cfg)), atol=1e-5)


def test_eval_transform_equals_index_preprocessing_on_real_photos(cub50_dir):
    cfg = DataConfig()  # 224 px, resize 256
    photos = sorted(cub50_dir.rglob("*.jpg"))[::997][:4]
    for path in photos:
        image = open_rgb(path)
        expected = preprocess_image(image, eval_preprocessing(cfg))
        np.testing.assert_allclose(build_eval_transform(cfg)(image).numpy(), expected, atol=1e-5)


def test_normalization_matches_hand_computation():
    colour = (200, 30, 104)
    out = build_eval_transform(DataConfig(image_size=32))(Image.new("RGB", (50, 40), colour))
    for channel in range(3):
        expected = (colour[channel] / 255 - IMAGENET_MEAN[channel]) / IMAGENET_STD[channel]
        assert torch.allclose(out[channel], torch.full((32, 32), expected), atol=1e-5)


def half_red_half_blue(size: int = 40) -> Image.Image:
    pixels = np.zeros((size, size, 3), dtype=np.uint8)
    pixels[:, : size // 2, 0] = 255
    pixels[:, size // 2 :, 2] = 255
    return Image.fromarray(pixels)


def red_on_left(tensor: torch.Tensor) -> bool:
    half = tensor.shape[-1] // 2
    return bool(tensor[0, :, :half].mean() > tensor[0, :, half:].mean())


@pytest.mark.parametrize("flip", [True, False])
def test_train_transform_flips_only_when_configured(flip):
    # scale (1, 1) on a square image keeps the whole image, so only the flip is random
    cfg = DataConfig(image_size=24, train_crop_scale=(1.0, 1.0), horizontal_flip=flip)
    transform, image = build_train_transform(cfg), half_red_half_blue()
    torch.manual_seed(0)
    outputs = [transform(image) for _ in range(30)]
    assert all(o.shape == (3, 24, 24) for o in outputs)
    left = {red_on_left(o) for o in outputs}
    assert left == ({True, False} if flip else {True})


def test_train_transform_crops_with_configured_scale():
    cfg = DataConfig(image_size=48, train_crop_scale=(0.3, 0.5))
    crop = build_train_transform(cfg).transforms[0]
    assert isinstance(crop, T.RandomResizedCrop)
    assert crop.scale == (0.3, 0.5) and crop.size == (48, 48)
    torch.manual_seed(1)
    top, left, height, width = crop.get_params(noise_image(200, 200), crop.scale, crop.ratio)
    assert 0.3 * 200 * 200 <= height * width <= 0.5 * 200 * 200 + 200  # rounding of the sides


@pytest.mark.parametrize("scale", [(0.5, 0.2), (0.0, 1.0), (0.5, 1.5)])
def test_bad_crop_scale_is_a_config_error(scale):
    with pytest.raises(ConfigError, match=rf"train_crop_scale .* got \({scale[0]}, {scale[1]}\)"):
        build_train_transform(DataConfig(train_crop_scale=scale))


def test_colour_jitter_changes_colours_only_when_asked() -> None:
    from PIL import Image

    from retrieval.training.config.train_config import DataConfig
    from retrieval.training.data_pipeline.transforms import build_train_transform

    image = Image.new("RGB", (64, 64), (200, 40, 40))  # one red: any crop of it is the same red
    torch.manual_seed(0)
    plain = DataConfig(image_size=32, horizontal_flip=False)
    same = {tuple(build_train_transform(plain)(image)[:, 0, 0].tolist()) for _ in range(5)}
    assert len(same) == 1  # cropping a uniform image changes nothing
    jittered = build_train_transform(plain.model_copy(update={"color_jitter": 0.4}))
    colours = {tuple(round(v, 3) for v in jittered(image)[:, 0, 0].tolist()) for _ in range(5)}
    assert len(colours) == 5  # every draw another colour
