"""The search service end to end on a tiny real index: results against brute force, items, writes, reload."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from index_fixtures import make_image
from PIL import Image
from serving_fixtures import API_KEY, GALLERY_SIZE, image_bytes, query_png, serving_client

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.serving.app import create_app
from retrieval.serving.batcher import MicroBatcher
from retrieval.serving.settings import make_settings, settings_from_env

KEY = {"X-API-Key": API_KEY}


def _stored(index_dir) -> tuple[np.ndarray, np.ndarray]:
    """(ids, float32 embeddings) straight from the index directory, for brute-force references."""
    with IndexStore.open(index_dir) as store:
        ids = store.ids()
        return ids, store.embeddings_of(ids)


def _upload(data: bytes, name: str = "q.png", content_type: str = "image/png") -> dict:
    return {"image": (name, data, content_type)}


@pytest.fixture(scope="module")
def client(tiny_index_template):
    with serving_client(tiny_index_template, thumbnail_px=32) as client:
        yield client


def test_embed_matches_the_onnx_embedder(client, tiny_index_template) -> None:
    data = query_png(3)
    body = client.post("/embed", files=_upload(data)).json()
    embedder = OnnxEmbedder(tiny_index_template / "model")
    expected = embedder.embed_images([Image.open(io.BytesIO(data)).convert("RGB")])[0]
    assert body["dim"] == len(body["embedding"]) == embedder.dim
    assert body["model_sha256"] == embedder.model_sha256
    np.testing.assert_allclose(body["embedding"], expected, atol=1e-5)


def test_float_search_is_the_brute_force_top_k(client, tiny_index_template) -> None:
    data = query_png(1)
    query = np.asarray(client.post("/embed", files=_upload(data)).json()["embedding"], dtype=np.float32)
    response = client.post("/search", files=_upload(data), params={"k": 7})
    assert response.status_code == 200
    body = response.json()
    ids, embeddings = _stored(tiny_index_template)
    similarity = dict(zip(ids.tolist(), (embeddings @ query).tolist()))
    got = [hit["id"] for hit in body["results"]]
    scores = [hit["score"] for hit in body["results"]]
    assert len(got) == 7 and len(set(got)) == 7 and body["score_kind"] == "cosine"
    assert scores == sorted(scores, reverse=True)
    np.testing.assert_allclose(scores, [similarity[i] for i in got], atol=2e-3)  # stored copies are float16
    assert min(scores) >= max(s for i, s in similarity.items() if i not in got) - 2e-3
    assert set(body["timings"]) == {"decode_ms", "embed_ms", "search_ms", "total_ms"}


def test_binary_search_ranks_by_hamming_distance(client, tiny_index_template) -> None:
    data = query_png(4)
    query = np.asarray(client.post("/embed", files=_upload(data)).json()["embedding"], dtype=np.float32)
    body = client.post("/search", files=_upload(data), data={"k": "5", "index": "binary"}).json()
    ids, embeddings = _stored(tiny_index_template)
    codes = np.unpackbits(binarize(embeddings), axis=1)
    query_bits = np.unpackbits(binarize(query[None]), axis=1)[0]
    bits = codes.shape[1]
    distance = dict(zip(ids.tolist(), (codes != query_bits).sum(axis=1).tolist()))
    got = [hit["id"] for hit in body["results"]]
    assert body["index"] == "binary" and body["score_kind"] == "hamming" and len(got) == 5
    np.testing.assert_allclose([hit["score"] for hit in body["results"]], [1 - 2 * distance[i] / bits for i in got])
    assert max(distance[i] for i in got) <= min(d for i, d in distance.items() if i not in got)


def test_binary_rerank_scores_by_cosine(client) -> None:
    body = client.post("/search?index=binary&k=3&rerank=12", files=_upload(query_png(2))).json()
    scores = [hit["score"] for hit in body["results"]]
    assert body["score_kind"] == "cosine" and body["rerank"] == 12 and len(scores) == 3
    assert scores == sorted(scores, reverse=True) and all(-1.01 <= s <= 1.01 for s in scores)


def test_hits_carry_label_metadata_and_thumbnail(client) -> None:
    hit = client.post("/search", files=_upload(query_png(0)), params={"k": 1}).json()["results"][0]
    item = client.get(f"/items/{hit['id']}").json()
    assert item == {
        "id": hit["id"],
        "key": None,
        "label": hit["label"],
        "metadata": hit["metadata"],
        "thumbnail_url": hit["thumbnail_url"],
        "path": hit["path"],
        "image_url": f"/items/{hit['id']}/image",
    }
    assert hit["path"] == Path(hit["path"]).name and hit["image_url"] == item["image_url"]  # API key: name only
    assert hit["label"].startswith("class_") and "n" in hit["metadata"]
    thumb = client.get(hit["thumbnail_url"])
    assert thumb.headers["content-type"] == "image/jpeg" and "max-age" in thumb.headers["cache-control"]
    assert Image.open(io.BytesIO(thumb.content)).size == (32, 27)  # 48x40 gallery image, longer side -> 32
    again = client.get(hit["thumbnail_url"], headers={"If-None-Match": thumb.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_similar_excludes_the_item_itself(client, tiny_index_template) -> None:
    body = client.get("/items/5/similar", params={"k": 4}).json()
    got = [hit["id"] for hit in body["results"]]
    ids, embeddings = _stored(tiny_index_template)
    similarity = embeddings @ embeddings[list(ids).index(5)]
    expected_best = max((s, i) for i, s in zip(ids.tolist(), similarity.tolist()) if i != 5)
    assert len(got) == 4 and 5 not in got
    assert body["results"][0]["score"] == pytest.approx(expected_best[0], abs=2e-3)


def test_readyz_metrics_and_page(client) -> None:
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["count"] == GALLERY_SIZE and ready["embedding_dim"] == 64
    client.post("/search", files=_upload(query_png(0)))
    metrics = client.get("/metrics").text
    assert 'retrieval_http_requests_total{method="POST",route="/search",status="200"}' in metrics
    assert f"retrieval_index_items {float(GALLERY_SIZE)}" in metrics
    assert "retrieval_embed_batch_size_count" in metrics
    page = client.get("/")
    assert page.status_code == 200 and 'type="file"' in page.text
    assert client.get("/static/app.js").status_code == 200
    assert "/search" in client.get("/openapi.json").json()["paths"]


def test_add_then_delete_an_item(fresh_index) -> None:
    new_image = image_bytes(make_image(5, 77, size=(64, 64)))
    with serving_client(fresh_index) as client:
        added = client.post(
            "/items", files=[("images", ("new.png", new_image, "image/png"))], data={"labels": "added"}, headers=KEY
        )
        assert added.status_code == 201, added.text
        (new_id,) = added.json()["ids"]
        assert added.json()["count"] == GALLERY_SIZE + 1
        top = client.post("/search", files=_upload(new_image), params={"k": 1}).json()["results"][0]
        assert top["id"] == new_id and top["label"] == "added" and top["score"] == pytest.approx(1.0, abs=2e-3)
        assert client.get(f"/items/{new_id}/thumbnail").status_code == 200
        deleted = client.delete(f"/items/{new_id}", headers=KEY)
        assert deleted.json() == {"id": new_id, "key": None, "count": GALLERY_SIZE}
        ids = [h["id"] for h in client.post("/search", files=_upload(new_image), params={"k": 50}).json()["results"]]
        assert new_id not in ids and len(ids) == GALLERY_SIZE
        assert client.get(f"/items/{new_id}").status_code == 404
        assert client.delete(f"/items/{new_id}", headers=KEY).status_code == 404
    with IndexStore.open(fresh_index) as store:  # the change reached the disk
        assert store.count == GALLERY_SIZE and new_id not in store.ids()


def test_reload_picks_up_changes_on_disk(fresh_index) -> None:
    with serving_client(fresh_index) as client:
        before = client.post("/admin/reload", headers=KEY).json()["generation"]
        with IndexStore.open(fresh_index) as store:  # another process removes two items
            store.remove([1, 2])
        reloaded = client.post("/admin/reload", headers=KEY).json()
        assert reloaded["generation"] == before + 1 and reloaded["count"] == GALLERY_SIZE - 2
        assert client.get("/items/1").status_code == 404
        assert client.get("/readyz").json()["count"] == GALLERY_SIZE - 2


def test_writes_need_the_api_key(fresh_index) -> None:
    files = [("images", ("a.png", query_png(1), "image/png"))]
    with serving_client(fresh_index) as client:
        assert client.post("/items", files=files, data={"labels": "x"}).status_code == 401
        assert client.delete("/items/1", headers={"X-API-Key": "wrong-key-123"}).status_code == 403
        assert client.post("/admin/reload").status_code == 401
        assert client.get("/items/1").status_code == 200  # the delete did not happen
    with serving_client(fresh_index, api_key=None) as client:  # no key configured: writes are off
        refused = client.delete("/items/1", headers={"X-API-Key": "anything-at-all"})
        assert refused.status_code == 403 and "--api-key" in refused.json()["detail"]


def test_not_ready_until_the_index_loads(tmp_path) -> None:
    app = create_app(make_settings(index_dir=tmp_path / "missing"))
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        for _ in range(200):  # until the background load has failed
            ready = client.get("/readyz")
            if "still loading" not in ready.json()["detail"]:
                break
            time.sleep(0.02)
        assert ready.status_code == 503 and ready.headers["content-type"] == "application/problem+json"
        assert "not an index directory" in ready.json()["detail"]
        assert client.post("/search", files=_upload(query_png(0))).status_code == 503


def test_cors_is_off_by_default_and_configurable(tiny_index_template) -> None:
    preflight = {"Origin": "http://example.org", "Access-Control-Request-Method": "POST"}
    with serving_client(tiny_index_template) as client:
        assert "access-control-allow-origin" not in client.options("/search", headers=preflight).headers
    with serving_client(tiny_index_template, cors_origins=["http://example.org"]) as client:
        allowed = client.options("/search", headers=preflight).headers
        assert allowed["access-control-allow-origin"] == "http://example.org"


def test_slow_requests_get_504(tiny_index_template) -> None:
    # The lone request waits 5 s for batch company but may only take 0.3 s.
    with serving_client(tiny_index_template, batch_max_wait_ms=5000, request_timeout_s=0.3) as client:
        response = client.post("/search", files=_upload(query_png(0)))
        assert response.status_code == 504 and "longer than" in response.json()["detail"]
        assert client.get("/healthz").status_code == 200


def test_settings_from_env(tmp_path) -> None:
    env = {"RETRIEVAL_INDEX_DIR": str(tmp_path), "RETRIEVAL_K_MAX": "7", "RETRIEVAL_CORS_ORIGINS": "http://a, http://b"}
    settings = settings_from_env(env, threads=3)
    assert (settings.index_dir, settings.k_max, settings.cors_origins, settings.threads) == (
        tmp_path,
        7,
        ["http://a", "http://b"],
        3,
    )
    with pytest.raises(ConfigError, match="k_max"):
        settings_from_env({**env, "RETRIEVAL_K_MAX": "zero"})


class _CountingEmbedder:
    """Doubles each row's sum; records the batch sizes it was called with."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed_arrays(self, batch: np.ndarray) -> np.ndarray:
        self.calls.append(len(batch))
        return batch.reshape(len(batch), -1).sum(axis=1, keepdims=True) * 2


def test_micro_batcher_groups_concurrent_requests() -> None:
    async def run() -> tuple[list[np.ndarray], list[int], list[int]]:
        batcher = MicroBatcher(max_batch_size=4, max_wait_ms=50, on_batch=observed.append)
        batcher.start()
        embedder = _CountingEmbedder()
        pixels = [np.full((3, 2, 2), float(i), dtype=np.float32) for i in range(10)]
        results = await asyncio.gather(*(batcher.embed(embedder, p) for p in pixels))
        await batcher.stop()
        return results, embedder.calls, observed

    observed: list[int] = []
    results, calls, sizes = asyncio.run(run())
    assert [float(r[0]) for r in results] == [24.0 * i for i in range(10)]  # each request got its own row
    assert calls == sizes == [4, 4, 2]


def test_invented_http_methods_do_not_add_metric_series(tiny_index_template: Path) -> None:
    with serving_client(tiny_index_template) as client:
        for index in range(5):
            client.request(f"BREW{index}", "/healthz")
        text = client.get("/metrics").text
    assert "BREW" not in text
    assert 'method="other"' in text


def test_the_full_image_is_the_stored_file_with_the_thumbnails_rules(client, tiny_index_template) -> None:
    hit = client.post("/search", files=_upload(query_png(0)), params={"k": 1}).json()["results"][0]
    full = client.get(hit["image_url"])  # no API key, as for thumbnails
    assert full.status_code == 200 and full.headers["content-type"] == "image/png"
    with IndexStore.open(tiny_index_template) as store:  # the hit shows only the file name (an API key is set)
        stored = Path(store.item(hit["id"]).path)
    assert full.content == stored.read_bytes()  # a PNG is sent as stored, at full size
    assert Image.open(io.BytesIO(full.content)).size == (48, 40)
    again = client.get(hit["image_url"], headers={"If-None-Match": full.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    missing = client.get("/items/999999/image")
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
