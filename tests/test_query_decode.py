"""The service's query decode (``query_pipeline.decode_query``): a JPEG decoded at reduced scale (Pillow's
draft) while its shorter side still covers the model's resize, the hostile-image bounds kept, and pixels near
the exact path's; ``region_resize`` within one level of torchvision's resize-then-crop."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from conftest import CARS196
from PIL import Image

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.image_io import open_rgb_bytes
from retrieval.indexing.exported_model.model_manifest import Preprocessing
from retrieval.indexing.exported_model.preprocess import draft_size, preprocess_image
from retrieval.serving.query_pipeline import decode_query
from retrieval.serving.settings import ServeSettings, settings_from_env

PREP = Preprocessing(resize=256, crop=224)
LEVEL = 1.0 / 255 / min(PREP.std)  # one 8-bit level in normalised units


def _settings(**values: object) -> ServeSettings:
    return ServeSettings(index_dir=Path("."), **values)  # type: ignore[arg-type]


def _jpeg(size: tuple[int, int], image: Image.Image | None = None) -> bytes:
    """A smooth gradient (or ``image`` resized) as a JPEG of ``size``."""
    if image is None:
        x = np.linspace(0, 255, size[0], dtype=np.float32)[None, :]
        y = np.linspace(0, 255, size[1], dtype=np.float32)[:, None]
        pixels = np.stack([x + 0 * y, y + 0 * x, (x + y) / 2], axis=-1).astype(np.uint8)
        image = Image.fromarray(pixels)
    buffer = io.BytesIO()
    image.resize(size, Image.Resampling.BICUBIC).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "size, decoded",
    [
        ((4032, 3024), (504, 378)),  # 3024 // 256 = 11: the largest scale, 1/8
        ((3024, 4032), (378, 504)),  # portrait: the same rule on the shorter side
        ((1100, 600), (550, 300)),  # 600 // 256 = 2: 1/2 (1/4 would leave 150 < 256)
        ((2000, 1100), (500, 275)),  # 1100 // 256 = 4: 1/4
        ((600, 400), (600, 400)),  # 400 // 256 = 1: decoded whole
    ],
)
def test_a_jpeg_is_decoded_at_the_largest_reduction_that_covers_the_resize(size, decoded) -> None:
    image = open_rgb_bytes(_jpeg(size), reduce_to=draft_size(PREP))
    assert image.size == decoded and min(image.size) >= PREP.resize


def test_the_draft_decode_stays_near_the_exact_path() -> None:
    """A phone-sized JPEG of a smooth image: the model's input differs from the full decode's by a few levels at
    most (the DCT scaling averages 8 x 8 blocks, then the bilinear filter shrinks 1.5x instead of 12x)."""
    data = _jpeg((4032, 3024))
    exact = decode_query(data, "q", _settings(draft_decode=False), PREP)
    draft = decode_query(data, "q", _settings(), PREP)
    assert draft.shape == exact.shape == (3, 224, 224)
    assert np.abs(draft - exact).mean() < 0.5 * LEVEL and np.abs(draft - exact).max() < 4 * LEVEL


@pytest.mark.skipif(not CARS196.is_dir(), reason="needs ../shared/data/cars196")
def test_the_draft_decode_of_a_real_photo_uploaded_large_stays_near_the_exact_path() -> None:
    photo = Image.open(sorted((CARS196 / "001.AM_General_Hummer_SUV_2000").glob("*.jpg"))[0]).convert("RGB")
    data = _jpeg((photo.width * 4, photo.height * 4), photo)
    exact = decode_query(data, "q", _settings(draft_decode=False), PREP)
    difference = np.abs(decode_query(data, "q", _settings(), PREP) - exact)
    assert difference.mean() < 2 * LEVEL  # edges move most; bench/bench_query_decode.py measures MAP@R


def test_images_the_draft_cannot_reduce_are_decoded_exactly_as_before() -> None:
    """A PNG, and a JPEG whose shorter side is under twice the resize: bit-identical to the exact path."""
    buffer = io.BytesIO()
    Image.open(io.BytesIO(_jpeg((1200, 900)))).save(buffer, "PNG")
    for data in (buffer.getvalue(), _jpeg((700, 500))):
        exact = decode_query(data, "q", _settings(draft_decode=False), PREP)
        np.testing.assert_array_equal(decode_query(data, "q", _settings(), PREP), exact)


def test_the_pixel_limit_applies_to_the_full_size_not_the_reduced_one() -> None:
    data = _jpeg((3000, 2000))  # 6,000,000 pixels; decoded at 1/4 it would be 375,000
    with pytest.raises(DataError, match="exceeds the limit of 5,000,000"):
        decode_query(data, "q", _settings(max_pixels=5_000_000), PREP)


def test_the_decode_budget_counts_what_is_decoded() -> None:
    """16 MB refuses a 4032 x 3024 JPEG decoded whole (about 110 MB) but admits it decoded at 1/8 (2 MB)."""
    data = _jpeg((4032, 3024))
    with pytest.raises(DataError, match="over the limit of 16 MB"):
        decode_query(data, "q", _settings(draft_decode=False, max_decode_mb=16), PREP)
    assert decode_query(data, "q", _settings(max_decode_mb=16), PREP).shape == (3, 224, 224)


def test_region_resize_is_within_one_level_of_the_whole_resize() -> None:
    image = Image.open(io.BytesIO(_jpeg((500, 375))))
    data = _jpeg((500, 375))
    exact = preprocess_image(image, PREP)
    region = decode_query(data, "q", _settings(region_resize=True), PREP)
    assert np.abs(region - exact).max() <= LEVEL + 1e-6


def test_the_decode_settings_default_to_draft_on_region_off_and_read_the_environment() -> None:
    settings = _settings()
    assert settings.draft_decode and not settings.region_resize
    environ = {"RETRIEVAL_INDEX_DIR": ".", "RETRIEVAL_DRAFT_DECODE": "false", "RETRIEVAL_REGION_RESIZE": "true"}
    from_env = settings_from_env(environ)
    assert not from_env.draft_decode and from_env.region_resize
