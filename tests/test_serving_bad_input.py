"""Hostile and broken requests get a 4xx with a JSON problem body, never a 500, and change nothing."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
from PIL import Image
from serving_fixtures import API_KEY, GALLERY_SIZE, image_bytes, query_png, serving_client

MAX_UPLOAD = 40_000
MAX_PIXELS = 1_000_000


def png_claiming(width: int, height: int) -> bytes:
    """A PNG signature + valid IHDR for ``width`` x ``height`` and a few bytes of pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b"")
    )


def _jpeg() -> bytes:
    return image_bytes(Image.new("RGB", (64, 48), (200, 30, 30)), "JPEG")


def _noise_png(side: int) -> bytes:
    return image_bytes(Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)))


UPLOADS = {
    "random bytes": (os.urandom(2048), "image/jpeg", 400),
    "truncated jpeg": (_jpeg()[: len(_jpeg()) // 2], "image/jpeg", 400),
    "zero bytes": (b"", "image/png", 400),
    "text declared as text": (b"hello, this is not an image", "text/plain", 415),
    "text declared as png": (b"hello, this is not an image", "image/png", 400),
    "png header claiming 100000x100000": (png_claiming(100_000, 100_000), "image/png", 400),
    "real png over the pixel limit": (image_bytes(Image.new("RGB", (1200, 1000))), "image/png", 400),
    "json content type": (b'{"image": 1}', "application/json", 415),
    "html content type": (_jpeg(), "text/html", 415),
    "over the upload size limit": (_noise_png(128), "image/png", 413),
}


@pytest.fixture(scope="module")
def client(tiny_index_template):
    with serving_client(tiny_index_template, max_upload_bytes=MAX_UPLOAD, max_pixels=MAX_PIXELS, k_max=20) as client:
        yield client


def assert_problem(response, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert set(body) == {"type", "title", "status", "detail"} and body["status"] == status
    assert body["detail"].strip(), "the detail must say what is wrong"


@pytest.mark.parametrize("case", list(UPLOADS))
@pytest.mark.parametrize("route", ["/search", "/embed"])
def test_bad_uploads(client, route: str, case: str) -> None:
    data, content_type, status = UPLOADS[case]
    assert_problem(client.post(route, files={"image": ("upload.bin", data, content_type)}), status)


@pytest.mark.parametrize(
    ("params", "data"),
    [
        ({"k": "ten"}, None),
        ({"k": "0"}, None),
        ({"k": "21"}, None),
        ({"k": "-3"}, None),
        ({"k": "1e3"}, None),
        ({"index": "hnsw"}, None),
        ({"k": "5", "rerank": "2"}, None),
        ({"rerank": "x"}, None),
        (None, {"k": "many"}),
        (None, {"index": "neither"}),
        (None, {"k": "999"}),
    ],
)
def test_bad_search_parameters(client, params, data) -> None:
    response = client.post("/search", params=params, data=data, files={"image": ("q.png", query_png(0), "image/png")})
    assert_problem(response, 422)


def test_missing_or_misnamed_file_field(client) -> None:
    assert_problem(client.post("/search"), 422)
    assert_problem(client.post("/search", files={"picture": ("q.png", query_png(0), "image/png")}), 422)
    assert_problem(client.post("/search", data={"image": "not a file"}), 422)
    assert_problem(client.post("/search", json={"image": "aGVsbG8="}), 422)
    assert_problem(client.post("/embed", content=b"\xff\xd8garbage", headers={"Content-Type": "image/jpeg"}), 422)


def test_bodies_over_the_limit_are_refused_before_parsing(client) -> None:
    big = os.urandom(MAX_UPLOAD * 3)
    assert_problem(client.post("/search", files={"image": ("big.jpg", big, "image/jpeg")}), 413)

    def chunked():  # no Content-Length: the limit is enforced while the body streams in
        boundary = b'--xyz\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\n\r\n'
        yield boundary
        for _ in range(8):
            yield os.urandom(MAX_UPLOAD // 2)
        yield b"\r\n--xyz--\r\n"

    response = client.post("/search", content=chunked(), headers={"Content-Type": "multipart/form-data; boundary=xyz"})
    assert_problem(response, 413)


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/items/999999", 404),
        ("/items/999999/thumbnail", 404),
        ("/items/999999/similar", 404),
        ("/items/-1", 422),  # ids are >= 1: out of range, like an id past int64
        ("/items/abc", 422),
        ("/items/1.5/similar", 422),
        ("/items/1/similar?k=0", 422),
        ("/items/1/similar?index=cosine", 422),
        ("/no/such/route", 404),
    ],
)
def test_unknown_items_and_routes(client, path: str, status: int) -> None:
    assert_problem(client.get(path), status)


def test_wrong_method(client) -> None:
    assert_problem(client.get("/search"), 405)
    assert_problem(client.put("/items/1"), 405)


def test_bad_writes_change_nothing(client) -> None:
    key = {"X-API-Key": API_KEY}
    broken = [("images", ("a.jpg", _jpeg()[:100], "image/jpeg"))]
    good = [("images", ("a.png", query_png(1), "image/png")), ("images", ("b.png", query_png(2), "image/png"))]
    assert_problem(client.post("/items", files=broken, data={"labels": "x"}, headers=key), 400)
    assert_problem(client.post("/items", files=good, data={"labels": ["a", "b", "c"]}, headers=key), 422)
    assert_problem(client.post("/items", files=good, data={"labels": " "}, headers=key), 422)
    assert_problem(client.post("/items", files=good, headers=key), 422)
    assert_problem(client.post("/items", data={"labels": "x"}, headers=key), 422)
    assert_problem(client.delete("/items/424242", headers=key), 404)
    assert_problem(client.delete("/items/1", headers={"X-API-Key": ""}), 401)
    assert client.get("/readyz").json()["count"] == GALLERY_SIZE


@pytest.mark.parametrize("path", ["/items/{id}", "/items/{id}/similar", "/items/{id}/thumbnail"])
@pytest.mark.parametrize("item_id", ["9223372036854775808", "0", "-5"])
def test_item_ids_outside_sqlite_range_are_422_not_500(path: str, item_id: str, tiny_index_template) -> None:
    with serving_client(tiny_index_template) as client:
        answer = client.get(path.format(id=item_id))
        deleted = client.delete(f"/items/{item_id}", headers={"X-API-Key": API_KEY})
    assert answer.status_code == 422 and answer.headers["content-type"] == "application/problem+json"
    assert deleted.status_code == 422


def test_an_upload_too_costly_to_decode_is_400_before_decoding(tiny_index_template) -> None:
    """A 77 KB 16-bit PNG can need most of a gigabyte to decode; the header says so, and that is enough."""
    image = Image.new("I;16", (3000, 2000))
    with serving_client(tiny_index_template, max_decode_mb=32) as client:
        answer = client.post("/search", files={"image": ("deep.png", image_bytes(image), "image/png")})
    assert answer.status_code == 400
    assert "would need about" in answer.json()["detail"] and "limit of 32 MB" in answer.json()["detail"]
