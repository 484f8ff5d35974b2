"""``GET /items/{id}/image``'s rules: browser formats as stored, others decoded within the uploads' budget
and sent as PNG, and a missing, broken or oversized file a 404, never a 500."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import anyio
import numpy as np
import pytest
from PIL import Image

from retrieval.indexing.common.errors import ItemNotFoundError
from retrieval.indexing.store.shared.items.items_db import Item
from retrieval.serving.images.item_images import image_response
from retrieval.serving.settings import make_settings


def _respond(path: Path, tmp_path: Path, **settings: object):
    item = Item(id=7, path=str(path), label="a", split=None, is_query=True, is_gallery=True)
    config = make_settings(index_dir=tmp_path, **settings)
    return asyncio.run(image_response(item, config, anyio.CapacityLimiter(1)))


def test_a_bmp_is_decoded_in_the_budget_and_sent_as_png(tmp_path: Path) -> None:
    pixels = np.random.default_rng(0).integers(0, 255, (30, 50, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "a.bmp")
    response = _respond(tmp_path / "a.bmp", tmp_path)
    assert response.media_type == "image/png" and response.headers["etag"]
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(response.body))), pixels)


def test_a_jpeg_is_streamed_as_stored(tmp_path: Path) -> None:
    Image.new("RGB", (64, 48), (10, 200, 30)).save(tmp_path / "a.jpg")
    response = _respond(tmp_path / "a.jpg", tmp_path)
    assert response.media_type == "image/jpeg" and Path(response.path) == tmp_path / "a.jpg"


@pytest.mark.parametrize("case", ["missing", "not an image", "too many pixels"])
def test_what_cannot_be_shown_is_not_found(tmp_path: Path, case: str) -> None:
    path = tmp_path / "a.png"
    if case == "not an image":
        path.write_text("notes")
    if case == "too many pixels":
        Image.new("RGB", (300, 300)).save(path)
    with pytest.raises(ItemNotFoundError, match="the image file of item 7 is"):
        _respond(path, tmp_path, max_pixels=10_000)
