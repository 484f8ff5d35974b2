"""The torch-free eval transform must match torchvision's on real photos and edge cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import CARS196, CUB50  # ../shared/data beside the repository
from PIL import Image

from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.exported_model.model_manifest import Preprocessing
from retrieval.indexing.exported_model.preprocess import (
    center_crop_box,
    normalize_pixels,
    preprocess_batch,
    preprocess_image,
    resized_size,
)


def torchvision_eval(prep: Preprocessing):
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.Resize(prep.resize),
            transforms.CenterCrop(prep.crop),
            transforms.ToTensor(),
            transforms.Normalize(prep.mean, prep.std),
        ]
    )


def photo_sample(birds: int = 12, cars: int = 8) -> list[Path]:
    """The first photo of ``birds`` cub50 classes and of ``cars`` Cars-196 classes (portrait and landscape sizes)."""
    paths = []
    for root, count in ((CUB50, birds), (CARS196, cars)):
        classes = sorted(p for p in root.iterdir() if p.is_dir())
        paths += [sorted(c.glob("*.jpg"))[0] for c in classes[:count]]
    return paths


def test_resized_size_follows_torchvision_rule() -> None:
    assert resized_size(500, 375, 256) == (341, 256)  # int(256 * 500 / 375) = 341
    assert resized_size(375, 500, 256) == (256, 341)
    assert resized_size(300, 300, 256) == (256, 256)
    assert center_crop_box(341, 256, 224) == (58, 16, 282, 240)  # round(58.5) = 58 (banker's), round(16) = 16


@pytest.mark.skipif(not (CUB50.is_dir() and CARS196.is_dir()), reason="needs ../shared/data/cub50 and cars196")
def test_matches_torchvision_on_real_photos() -> None:
    prep = Preprocessing()
    reference = torchvision_eval(prep)
    paths = photo_sample()
    assert len(paths) == 20
    diffs = []
    for path in paths:
        img = open_rgb(path)
        ours = preprocess_image(img, prep)
        theirs = reference(img).numpy()
        assert ours.shape == theirs.shape == (3, 224, 224) and ours.dtype == np.float32
        diffs.append(np.abs(ours - theirs))
    # same Pillow resize, same crop offsets, same float32 arithmetic: bit-identical (measured 0.0)
    assert max(d.max() for d in diffs) == 0.0


@pytest.mark.parametrize("size", [(20, 12), (31, 40), (64, 33)])
def test_small_images_are_padded_like_torchvision(size: tuple[int, int]) -> None:
    prep = Preprocessing(resize=24, crop=32)  # resize < crop forces zero padding
    rng = np.random.default_rng(sum(size))
    img = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
    np.testing.assert_allclose(preprocess_image(img, prep), torchvision_eval(prep)(img).numpy(), atol=1e-5)


@pytest.mark.parametrize("mode", ["L", "P", "RGBA", "CMYK"])
def test_any_mode_becomes_three_channels(mode: str) -> None:
    prep = Preprocessing(resize=36, crop=32)
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8))
    out = preprocess_image(rgb.convert(mode), prep)
    assert out.shape == (3, 32, 32)
    expected = preprocess_image(rgb.convert(mode).convert("RGB"), prep)
    np.testing.assert_array_equal(out, expected)


def test_batch_stacks_single_images_and_handles_empty() -> None:
    prep = Preprocessing(resize=36, crop=32)
    images = [Image.new("RGB", (40 + i, 50), (i * 40, 10, 200)) for i in range(3)]
    batch = preprocess_batch(images, prep)
    assert batch.shape == (3, 3, 32, 32)
    np.testing.assert_array_equal(batch[1], preprocess_image(images[1], prep))
    assert preprocess_batch([], prep).shape == (0, 3, 32, 32)
    # a solid colour becomes (value / 255 - mean) / std in every pixel of its channel
    expected_red = (0 / 255 - prep.mean[0]) / prep.std[0]
    np.testing.assert_allclose(batch[0, 0], expected_red, rtol=1e-6)


@pytest.mark.parametrize(
    "mean, std",
    [
        ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
        ((0.1, 0.9, 0.3), (0.7, 0.05, 1.3)),
    ],
)
def test_normalization_table_is_bit_identical_to_the_arithmetic(mean, std) -> None:
    """The look-up gives exactly torchvision's ``ToTensor -> Normalize`` float32 values at every level."""
    prep = Preprocessing(mean=mean, std=std)
    levels = np.arange(256, dtype=np.uint8)
    pixels = np.stack(np.meshgrid(levels, levels[::-1], indexing="ij"), axis=-1)[:, :, [0, 1, 0]]  # (256, 256, 3)
    pixels = np.ascontiguousarray(pixels)
    scaled = pixels.astype(np.float32) / np.float32(255.0)
    expected = ((scaled - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)).transpose(2, 0, 1)
    out = normalize_pixels(pixels, prep)
    assert out.dtype == np.float32 and out.shape == (3, 256, 256) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, expected)
