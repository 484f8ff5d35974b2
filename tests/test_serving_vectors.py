"""The service as a vector database: JSON bodies on POST /items, PUT /items/by-key/{key} and POST /search
(the multipart forms of the same paths still take images), vectors out (with_vectors), delete by filter,
similar by key, and an upsert that keeps its id while others search."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import numpy as np
from serving_fixtures import API_KEY, GALLERY_SIZE, query_png, running_server, serving_client

from retrieval.indexing.store.files.index_store import IndexStore

AUTH = {"X-API-Key": API_KEY}


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dim))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _index_facts(index_dir: Path) -> tuple[int, str, np.ndarray, np.ndarray]:
    with IndexStore.open(index_dir) as store:
        return store.dim, store.manifest.model_sha256, store.ids(), store.embeddings_of(store.ids())


def test_vectors_in_searched_and_out(fresh_index: Path) -> None:
    dim, sha, ids, stored = _index_facts(fresh_index)
    vectors = _unit(3, dim, seed=1)
    items = [
        {"vector": v.tolist(), "key": f"v{i}", "label": "vec", "metadata": {"n": i}} for i, v in enumerate(vectors)
    ]
    with serving_client(fresh_index) as client:
        added = client.post("/items", json={"items": items, "model": sha[:12]}, headers=AUTH)
        assert added.status_code == 201, added.text
        body = added.json()
        assert body["count"] == GALLERY_SIZE + 3 and body["normalised"] == 0 and len(body["ids"]) == 3
        one = client.get(f"/items/{body['ids'][1]}", params={"with_vectors": "true"}).json()
        assert (one["key"], one["label"], one["metadata"]) == ("v1", "vec", {"n": 1})
        assert np.allclose(one["vector"], vectors[1], atol=1e-3)  # float16 as stored
        assert "vector" not in client.get(f"/items/{body['ids'][1]}").json()
        page = client.get("/items", params={"with_vectors": "true", "filter": '{"label": "vec"}'}).json()["items"]
        assert [row["key"] for row in page] == ["v0", "v1", "v2"] and len(page[2]["vector"]) == dim

        found = client.post("/search", json={"vector": (vectors[2] * 3).tolist(), "k": 4}).json()
        assert found["results"][0]["key"] == "v2" and "were not L2-normalised" in found["warnings"][0]
        every = np.concatenate([stored, vectors.astype(np.float32)])
        wanted = np.concatenate([ids, body["ids"]])[np.argsort(-(every @ vectors[0]), kind="stable")[:4]]
        assert [
            hit["id"] for hit in client.post("/search", json={"vector": vectors[0].tolist(), "k": 4}).json()["results"]
        ] == wanted.tolist()
        batch = client.post(
            "/search", json={"vectors": vectors.tolist(), "k": 2, "filter": {"n": {"$gte": 1}}, "index": "binary"}
        ).json()["batch"]
        assert [entry["image"] for entry in batch] == ["vector 1", "vector 2", "vector 3"]
        assert [entry["results"][0]["key"] for entry in batch[1:]] == ["v1", "v2"]
        assert all(hit["metadata"]["n"] >= 1 for entry in batch for hit in entry["results"])

        similar = client.get("/items/by-key/v1/similar", params={"k": 3}).json()["results"]
        assert body["ids"][1] not in [hit["id"] for hit in similar] and len(similar) == 3
        images = client.post("/search", files={"image": ("q.png", query_png(), "image/png")}, params={"k": 2})
        assert images.status_code == 200 and len(images.json()["results"]) == 2  # the form still takes images


def test_bad_vectors_are_refused_with_a_sentence_and_write_nothing(fresh_index: Path) -> None:
    dim, sha, _, _ = _index_facts(fresh_index)
    good = _unit(1, dim, seed=2)[0].tolist()
    with serving_client(fresh_index) as client:
        cases = [
            ({"items": [{"vector": good[:-1]}]}, 422, f"must hold {dim} numbers"),
            ('{"items": [{"vector": [NaN' + ", 0" * (dim - 1) + "]}]}", 422, "not a finite number"),
            ({"items": [{"vector": good}], "model": "0" * 64}, 409, f"index holds vectors of model {sha[:12]}"),
            ({"items": [{"vector": good, "label": " "}]}, 422, "item 1: the label is empty"),
            ({"items": []}, 422, "items"),
            ({"items": [{"vector": good, "colour": 1}]}, 422, "colour"),
        ]
        for body, status, message in cases:
            content = body if isinstance(body, str) else json.dumps(body)
            answer = client.post("/items", content=content, headers={**AUTH, "Content-Type": "application/json"})
            assert answer.status_code == status and message in answer.json()["detail"], (body, answer.text)
        assert client.post("/items", json={"items": [{"vector": good}]}).status_code == 401
        assert client.post("/search", json={"vector": good, "vectors": [good]}).status_code == 422
        assert client.post("/search", json={"vector": good, "model": "f" * 12}).status_code == 409
        assert client.get("/items/by-key/nope/similar").status_code == 404
        charset = client.post(
            "/search", content=json.dumps({"vector": good}), headers={"Content-Type": "application/json; charset=utf-8"}
        )
        assert charset.status_code == 200 and len(charset.json()["results"]) == 10
        broken = client.post("/search", content=b"{not json", headers={"Content-Type": "application/json"})
        assert broken.status_code == 422 and "JSON" in broken.json()["detail"]
        assert client.get("/readyz").json()["count"] == GALLERY_SIZE


def test_delete_by_filter_counts_refuses_an_empty_filter_and_deletes(fresh_index: Path) -> None:
    dim, _, _, _ = _index_facts(fresh_index)
    vectors = _unit(4, dim, seed=3)
    items = [{"vector": v.tolist(), "label": "batch", "metadata": {"run": i % 2}} for i, v in enumerate(vectors)]
    with serving_client(fresh_index) as client:
        client.post("/items", json={"items": items}, headers=AUTH)
        delete = "/items/delete"
        dry = client.post(delete, json={"filter": {"label": "batch", "run": 1}, "dry_run": True}, headers=AUTH)
        assert dry.json() == {"deleted": 2, "count": GALLERY_SIZE + 4, "dry_run": True, "warnings": []}
        empty = client.post(delete, json={"filter": {}}, headers=AUTH)
        assert empty.status_code == 422 and '"all": true' in empty.json()["detail"]
        assert client.post(delete, json={"filter": {"run": 1}, "all": True}, headers=AUTH).status_code == 422
        done = client.post(delete, json={"filter": {"label": "batch", "run": 1}}, headers=AUTH).json()
        assert done == {"deleted": 2, "count": GALLERY_SIZE + 2, "dry_run": False, "warnings": []}
        left = client.get("/items", params={"filter": '{"label": "batch"}'}).json()["items"]
        assert [row["metadata"]["run"] for row in left] == [0, 0]
        everything = client.post(delete, json={"filter": {}, "all": True}, headers=AUTH).json()
        assert everything["deleted"] == GALLERY_SIZE + 2 and everything["count"] == 0
        assert client.post("/search", json={"vector": vectors[0].tolist()}).json()["results"] == []
        assert client.get("/items/1/similar").status_code == 404  # an emptied index: not a 500
        retry = {**AUTH, "Idempotency-Key": "batch-7"}
        first = client.post("/items", json={"items": items[:2]}, headers=retry).json()
        again = client.post("/items", json={"items": items[:2]}, headers=retry).json()
        assert again["ids"] == first["ids"] and again["count"] == first["count"] == 2  # a retry adds nothing
        assert client.get("/items/1", params={"with_vectors": "true"}).status_code == 404


def test_an_upsert_keeps_the_id_while_others_search(fresh_index: Path) -> None:
    dim, _, _, _ = _index_facts(fresh_index)
    first, second = _unit(2, dim, seed=4)
    errors: list[str] = []
    put_ids: list[int] = []
    done = threading.Event()

    def writer(base: str) -> None:
        with httpx.Client(base_url=base, headers=AUTH, timeout=30) as http:
            for round_ in range(10):
                vector = (first, second)[round_ % 2]
                answer = http.put("/items/by-key/k", json={"vector": vector.tolist(), "label": f"r{round_ % 2}"})
                put_ids.append(answer.json()["id"]) if answer.status_code in (200, 201) else errors.append(answer.text)
        done.set()

    def searcher(base: str, kind: str) -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            while not done.is_set():
                answer = http.post(
                    "/search", json={"vectors": [first.tolist(), second.tolist()], "k": 5, "index": kind}
                )
                if answer.status_code != 200:
                    errors.append(answer.text)
                    continue
                for entry in answer.json()["batch"]:
                    found = [hit["id"] for hit in entry["results"]]
                    if len(set(found)) != len(found):
                        errors.append(f"an id twice in one answer: {found}")

    with running_server(fresh_index, batch_max_wait_ms=2) as base:
        threads = [threading.Thread(target=writer, args=(base,))]
        threads += [threading.Thread(target=searcher, args=(base, kind)) for kind in ("float", "binary")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        with httpx.Client(base_url=base, timeout=30) as http:
            final = http.post("/search", json={"vector": first.tolist(), "k": GALLERY_SIZE + 1}).json()["results"]
            scroll = http.get("/items", params={"limit": 1000}).json()["items"]
    assert not errors, errors[:3]
    assert len(put_ids) == 10 and set(put_ids) == {put_ids[0]}  # created once, then replaced under the same id
    (item_id,) = set(put_ids)
    mine = [hit for hit in final if hit["id"] == item_id]
    assert len(mine) == 1 and mine[0]["label"] == "r1"  # the last write was the second vector
    assert abs(mine[0]["score"] - float(first @ second)) < 1e-2  # the old vector is gone: its score is the new one's
    assert [row["id"] for row in scroll].count(item_id) == 1 and len(scroll) == GALLERY_SIZE + 1


def test_vectors_as_base64_float32_are_the_same_items_and_bad_ones_are_422(fresh_index: Path) -> None:
    import base64

    dim, _, _, _ = _index_facts(fresh_index)
    vectors = _unit(2, dim, seed=5).astype("<f4")
    b64 = [base64.b64encode(row.tobytes()).decode() for row in vectors]
    with serving_client(fresh_index) as client:
        added = client.post(
            "/items",
            json={"items": [{"vector_b64": b64[0], "key": "b"}, {"vector": vectors[1].tolist(), "key": "l"}]},
            headers=AUTH,
        )
        assert added.status_code == 201, added.text
        by_b64, by_list = added.json()["ids"]
        found = client.post("/search", json={"vector": vectors[0].tolist(), "k": 1}).json()["results"][0]
        assert found["id"] == by_b64 and abs(found["score"] - 1.0) < 1e-3
        stored = client.get(f"/items/{by_b64}", params={"with_vectors": "true"}).json()["vector"]
        assert np.allclose(stored, vectors[0], atol=1e-3)
        bad = {
            "both": {"vector": vectors[0].tolist(), "vector_b64": b64[0]},
            "neither": {"key": "x"},
            "not base64": {"vector_b64": "not base64!"},
            "odd bytes": {"vector_b64": base64.b64encode(b"\x00" * 6).decode()},
            "short": {"vector_b64": base64.b64encode(vectors[0, :-1].tobytes()).decode()},
        }
        for name, item in bad.items():
            refused = client.post("/items", json={"items": [item]}, headers=AUTH)
            assert refused.status_code == 422, (name, refused.text)
            assert "item 1" in refused.json()["detail"] or "numbers" in refused.json()["detail"], name
        assert client.get("/readyz").json()["count"] == GALLERY_SIZE + 2  # nothing of the refused written


def test_a_one_vector_search_takes_no_worker_thread_and_a_batch_add_does(fresh_index: Path, monkeypatch) -> None:
    """A small JSON body is parsed on the event loop and a dependency needs no thread: a one-vector search
    hops only to the store thread; a body above ``INLINE_BODY_BYTES`` is still parsed in a worker thread."""
    from anyio import to_thread

    from retrieval.serving.http import json_body_route

    dim = _index_facts(fresh_index)[0]
    real = to_thread.run_sync
    worker_calls: list[str] = []

    async def counted(function, *args, **kwargs):
        worker_calls.append(getattr(function, "__qualname__", repr(function)))
        return await real(function, *args, **kwargs)

    monkeypatch.setattr(to_thread, "run_sync", counted)
    monkeypatch.setattr(json_body_route.anyio.to_thread, "run_sync", counted)
    vectors = _unit(150, dim, seed=5)
    with serving_client(fresh_index) as client:
        worker_calls.clear()
        found = client.post("/search", json={"vector": vectors[0].tolist(), "k": 3, "index": "binary"})
        assert found.status_code == 200 and len(found.json()["results"]) == 3
        assert worker_calls == []
        items = [{"vector": v.tolist(), "label": "many"} for v in vectors]
        body = json.dumps({"items": items})
        assert len(body) > json_body_route.INLINE_BODY_BYTES
        added = client.post("/items", content=body, headers={**AUTH, "Content-Type": "application/json"})
        assert added.status_code == 201 and len(added.json()["ids"]) == 150
        assert any("_parsed" in name for name in worker_calls)  # the repeated-key check and model_validate_json
