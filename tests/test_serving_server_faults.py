"""Faults on the server's side (a bad reload, an unwritable index, a lost image file) get the right
status and a sentence in a problem body, and the service keeps serving what it had."""

from __future__ import annotations

import http.client
import json

import pytest
from fastapi.testclient import TestClient
from index_fixtures import make_image
from serving_fixtures import API_KEY, GALLERY_SIZE, image_bytes, query_png, running_server, serving_client

from retrieval.indexing.common.artifact_names import FLOAT_INDEX_NAME, SEGMENTS_SUBDIR
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.serving.app import create_app
from retrieval.serving.images.upload_storage import UPLOADS_SUBDIR
from retrieval.serving.settings import make_settings

KEY = {"X-API-Key": API_KEY}


def _problem(response, status: int) -> str:
    """Assert a problem body with ``status``; return its detail."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return response.json()["detail"]


def _add(client, data: bytes):
    files = [("images", ("new.png", data, "image/png"))]
    return client.post("/items", files=files, data={"labels": "added"}, headers=KEY)


def test_a_failed_reload_is_503_and_the_old_index_keeps_serving(fresh_index) -> None:
    with serving_client(fresh_index) as client:
        (fresh_index / FLOAT_INDEX_NAME).write_bytes(b"not a faiss index")
        detail = _problem(client.post("/admin/reload", headers=KEY), 503)
        assert "reload failed, generation 1 keeps serving" in detail and FLOAT_INDEX_NAME in detail
        assert client.get("/readyz").json()["count"] == GALLERY_SIZE
        found = client.post("/search", files={"image": ("q.png", query_png(2), "image/png")}, params={"k": 3})
        assert found.status_code == 200 and len(found.json()["results"]) == 3


def test_an_unwritable_uploads_folder_is_503_and_adds_nothing(fresh_index) -> None:
    with serving_client(fresh_index) as client:
        (fresh_index / UPLOADS_SUBDIR).write_bytes(b"")  # a file where the folder goes: it cannot be created
        detail = _problem(_add(client, image_bytes(make_image(1, 70))), 503)
        assert "writable" in detail
        assert client.get("/readyz").json()["count"] == GALLERY_SIZE


def test_an_unwritable_index_file_is_503_and_adds_nothing(fresh_index) -> None:
    with serving_client(fresh_index) as client:
        (fresh_index / SEGMENTS_SUBDIR).write_bytes(b"")  # a file where the add's delta segment folder goes
        detail = _problem(_add(client, image_bytes(make_image(1, 71))), 503)
        assert "cannot write to the index directory" in detail and "writable" in detail
        assert client.get("/readyz").json()["count"] == GALLERY_SIZE


@pytest.mark.parametrize("damage", ["deleted", "corrupted"])
def test_the_thumbnail_of_an_item_whose_file_is_lost_is_404(fresh_index, damage: str) -> None:
    with serving_client(fresh_index) as client:
        (new_id,) = _add(client, image_bytes(make_image(2, 72))).json()["ids"]
        (stored,) = (fresh_index / UPLOADS_SUBDIR).iterdir()
        if damage == "deleted":
            stored.unlink()
        else:
            stored.write_bytes(b"no longer an image")
        detail = _problem(client.get(f"/items/{new_id}/thumbnail"), 404)
        assert f"the image file of item {new_id} is missing or unreadable" in detail
        assert client.get(f"/items/{new_id}").status_code == 200  # the item itself is still there


def test_a_service_that_is_not_ready_says_when_to_retry(tmp_path) -> None:
    with TestClient(create_app(make_settings(index_dir=tmp_path / "missing"))) as client:
        ready = client.get("/readyz")  # still loading, or failed: both are 503 with Retry-After
        assert "The service is not ready" in _problem(ready, 503)
        assert ready.headers["retry-after"] == "2"


def _exchange(connection: http.client.HTTPConnection, path: str) -> tuple[int, str, dict]:
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.getheader("content-type", ""), json.loads(response.read())


def test_an_unexpected_error_is_a_500_problem_and_the_connection_stays_usable(fresh_index, monkeypatch) -> None:
    """Starlette's handler for Exception re-raised after answering, and uvicorn then dropped the keep-alive
    connection: the client's next request on it failed with 'Connection reset by peer'."""

    def broken(self, item_id: int):
        raise RuntimeError("a bug, not the client's fault")

    monkeypatch.setattr(IndexStore, "item", broken)
    with running_server(fresh_index) as base:
        connection = http.client.HTTPConnection(base.removeprefix("http://"), timeout=30)
        try:
            for _ in range(2):  # the same connection twice: the 500 left it usable
                status, content_type, body = _exchange(connection, "/items/1")
                assert (status, content_type) == (500, "application/problem+json")
                assert body["status"] == 500 and "unexpected error" in body["detail"]
            status, _, body = _exchange(connection, "/healthz")
            assert status == 200, body
        finally:
            connection.close()
