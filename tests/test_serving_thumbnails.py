"""Thumbnails decode within the uploads' budget: they wait for the same decode slots, an image over the
memory budget is refused from its header, and concurrent requests for one item decode it once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from index_fixtures import make_image
from PIL import Image
from serving_fixtures import API_KEY, image_bytes, running_server, serving_client

from retrieval.indexing.data import image_io
from retrieval.serving.images import thumbnails

KEY = {"X-API-Key": API_KEY}
CONCURRENT = 8


class DecodeProbe:
    """Counts the decodes thumbnails make and the most that ran at once (each is slowed down a little)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.running = self.most = 0
        self._lock = threading.Lock()
        original = image_io._read

        def counting(*args, **kwargs):
            with self._lock:
                self.calls += 1
                self.running += 1
                self.most = max(self.most, self.running)
            try:
                time.sleep(0.3)
                return original(*args, **kwargs)
            finally:
                with self._lock:
                    self.running -= 1

        monkeypatch.setattr(image_io, "_read", counting)


def _add(base: str, image: Image.Image, label: str) -> int:
    files = [("images", (f"{label}.png", image_bytes(image), "image/png"))]
    added = httpx.post(f"{base}/items", files=files, data={"labels": label}, headers=KEY, timeout=30)
    assert added.status_code == 201, added.text
    return added.json()["ids"][0]


def _get_all(base: str, paths: list[str]) -> list[httpx.Response]:
    with ThreadPoolExecutor(len(paths)) as pool:
        return list(pool.map(lambda path: httpx.get(f"{base}{path}", timeout=30), paths))


def test_concurrent_requests_for_one_item_decode_it_once(fresh_index: Path, monkeypatch) -> None:
    with running_server(fresh_index) as base:
        item = _add(base, make_image(2, 300, size=(400, 300)), "big")
        probe = DecodeProbe(monkeypatch)
        answers = _get_all(base, [f"/items/{item}/thumbnail"] * CONCURRENT)
    assert [answer.status_code for answer in answers] == [200] * CONCURRENT
    assert len({answer.content for answer in answers}) == 1
    assert probe.calls == 1


def test_thumbnails_wait_for_the_decode_slots_of_uploads(fresh_index: Path, monkeypatch) -> None:
    with running_server(fresh_index, max_concurrent_decodes=1) as base:
        items = [_add(base, make_image(n % 6, 310 + n, size=(200, 150)), f"i{n}") for n in range(4)]
        probe = DecodeProbe(monkeypatch)
        answers = _get_all(base, [f"/items/{item}/thumbnail" for item in items])
    assert [answer.status_code for answer in answers] == [200] * 4
    assert probe.calls == 4 and probe.most == 1


def test_a_thumbnail_over_the_decode_budget_is_refused_from_the_header(fresh_index: Path, tmp_path: Path) -> None:
    with serving_client(fresh_index, max_decode_mb=16) as client:
        big = Image.fromarray(np.zeros((1500, 2000), np.uint16) + 300)  # 16-bit grey: over 16 MB to decode
        data = image_bytes(big)
        files = [("images", ("big.png", data, "image/png"))]
        with serving_client(fresh_index, max_decode_mb=400) as roomy:  # the add itself fits a larger budget
            item = roomy.post("/items", files=files, data={"labels": "big"}, headers=KEY).json()["ids"][0]
        client.post("/admin/reload", headers=KEY)
        answer = client.get(f"/items/{item}/thumbnail")
        assert answer.status_code == 404
        assert "over the limit of 16 MB" in answer.json()["detail"]


def test_a_large_jpeg_is_decoded_at_a_reduced_scale(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    Image.fromarray(np.full((3000, 4000, 3), 128, np.uint8)).save(path, quality=90)
    image = thumbnails.decode_for_thumbnail(path, 160, max_pixels=10**8, max_decode_bytes=16 << 20)
    assert max(image.size) <= 4000 // 8 * 2  # JPEG's draft mode decoded at 1/8 (or 1/4) scale


@pytest.mark.parametrize("damage", ["moved", "corrupt"])
def test_a_thumbnail_404_shows_no_server_path_where_paths_are_hidden(damage: str, fresh_index: Path) -> None:
    """With an API key (paths hidden) the refusal names the file, never the directories (issue 44)."""
    files = [("images", ("kept.png", image_bytes(make_image(0, 1)), "image/png"))]
    with serving_client(fresh_index) as client:
        item = client.post("/items", files=files, data={"labels": "kept"}, headers=KEY).json()["ids"][0]
        (stored,) = (fresh_index / "uploads").rglob("*.png")
        if damage == "moved":
            stored.rename(stored.with_suffix(".moved"))
        else:
            stored.write_bytes(b"not an image")
        answer = client.get(f"/items/{item}/thumbnail")
    assert answer.status_code == 404
    detail = answer.json()["detail"]
    assert str(fresh_index) not in detail and "/" not in detail, detail
    assert ("No such file" if damage == "moved" else stored.name) in detail, detail
