"""JSON bodies a red team sent (issue 54): a key named twice, a delete by a misspelled key or of every item,
loose booleans and numbers, an Idempotency-Key reused for another body, and a method a path does not serve.
Each is refused with one sentence and nothing is lost; the index's size is checked after every refusal."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from index_fixtures import make_image
from serving_fixtures import API_KEY, GALLERY_SIZE, image_bytes, serving_client

from retrieval.indexing.store.files.index_store import IndexStore

AUTH = {"X-API-Key": API_KEY, "Content-Type": "application/json"}
DELETE = "/items/delete"


def _dim(index_dir: Path) -> int:
    with IndexStore.open(index_dir) as store:
        return store.dim


def _unit(dim: int, seed: int) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(dim)
    return (vector / np.linalg.norm(vector)).tolist()


def _count(client) -> int:
    return client.get("/readyz").json()["count"]


def _refused(response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert all(word in detail for word in words), detail
    return detail


def test_a_key_named_twice_at_any_depth_is_a_422_naming_it_and_deletes_nothing(fresh_index: Path) -> None:
    good = json.dumps(_unit(_dim(fresh_index), seed=1))
    cases = [
        ("POST", DELETE, '{"filter": {"label": "class_1"}, "dry_run": true, "dry_run": false}', "dry_run"),
        ("POST", DELETE, '{"filter": {"label": "class_1", "label": "class_2"}}', "label"),
        ("POST", DELETE, '{"filter": {"n": {"$gte": 1, "$gte": 0}}}', "$gte"),
        ("POST", "/items", '{"items": [{"vector": V, "metadata": {"a": 1, "a": 2}}]}', '"a"'),
        ("PUT", "/items/by-key/k1", '{"vector": V, "label": "x", "label": "y"}', "label"),
        ("POST", "/search", '{"vector": V, "k": 3, "k": 5}', '"k"'),
    ]
    with serving_client(fresh_index) as client:
        for method, path, body, key in cases:
            answer = client.request(method, path, content=body.replace("V", good), headers=AUTH)
            _refused(answer, 422, key, "twice")
        assert _count(client) == GALLERY_SIZE


def test_a_delete_by_a_key_no_item_has_or_of_every_item_needs_all_and_warns(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        typo = {"filter": {"grpp": {"$ne": "big"}}}
        for body in (typo, {**typo, "dry_run": True}, {"filter": {"label": {"$ne": "nothing"}}}):
            _refused(client.post(DELETE, json=body, headers=AUTH), 422, '"all": true')
        detail = _refused(client.post(DELETE, json=typo, headers=AUTH), 422, "no item has the metadata key 'grpp'")
        assert f"{GALLERY_SIZE} of {GALLERY_SIZE}" in detail
        assert _count(client) == GALLERY_SIZE
        some = client.post(DELETE, json={"filter": {"label": "class_1"}, "dry_run": True}, headers=AUTH).json()
        assert some["warnings"] == [] and 0 < some["deleted"] < GALLERY_SIZE
        search = client.post("/search", json={"vector": _unit(_dim(fresh_index), 2), "filter": typo["filter"]})
        done = client.post(DELETE, json={**typo, "all": True}, headers=AUTH)
        assert done.status_code == 200, done.text
        assert done.json()["deleted"] == GALLERY_SIZE and done.json()["count"] == 0
        assert done.json()["warnings"] == search.json()["warnings"] != []  # the search's own sentence


@pytest.mark.parametrize("loose", ['"yes"', '"t"', '"on"', "1", "1.0", '"true"'])
def test_loose_booleans_are_refused_and_delete_nothing(fresh_index: Path, loose: str) -> None:
    with serving_client(fresh_index) as client:
        for body in ('{"filter": {}, "all": L}', '{"filter": {"label": "class_1"}, "dry_run": L}'):
            _refused(client.post(DELETE, content=body.replace("L", loose), headers=AUTH), 422, "bool")
        assert _count(client) == GALLERY_SIZE


def test_numbers_and_vector_components_must_be_json_numbers(fresh_index: Path) -> None:
    dim = _dim(fresh_index)
    good = _unit(dim, seed=3)
    with serving_client(fresh_index) as client:
        for loose in ({"k": "3"}, {"k": True}, {"k": 3.5}, {"offset": "1"}, {"min_score": "0.5"}, {"rerank": "20"}):
            _refused(client.post("/search", json={"vector": good, **loose}), 422, next(iter(loose)))
        for component in ("0.5", True):
            bad = [component, *good[1:]]
            _refused(client.post("/search", json={"vector": bad}), 422, "vector")
            _refused(client.post("/items", json={"items": [{"vector": bad}]}, headers=AUTH), 422, "vector")
            _refused(client.put("/items/by-key/k2", json={"vector": bad}, headers=AUTH), 422, "vector")
        assert client.post("/search", json={"vector": good, "k": 3, "min_score": -1}).status_code == 200
        assert _count(client) == GALLERY_SIZE


def test_an_idempotency_key_reused_with_another_body_is_a_422_and_the_same_body_replays(fresh_index: Path) -> None:
    dim = _dim(fresh_index)
    first_items = {"items": [{"vector": _unit(dim, 4), "label": "a"}]}
    other_items = {"items": [{"vector": _unit(dim, 5), "label": "b"}]}
    with serving_client(fresh_index) as client:
        retry = {**AUTH, "Idempotency-Key": "json-1"}
        first = client.post("/items", json=first_items, headers=retry)
        assert first.status_code == 201, first.text
        assert client.post("/items", json=first_items, headers=retry).json() == first.json()
        _refused(client.post("/items", json=other_items, headers=retry), 422, "Idempotency-Key", "another")
        assert _count(client) == GALLERY_SIZE + 1

        form = {"X-API-Key": API_KEY, "Idempotency-Key": "form-1"}
        image = image_bytes(make_image(1, 90))
        sent = client.post("/items", files={"image": ("a.png", image, "image/png")}, data={"label": "a"}, headers=form)
        assert sent.status_code == 201, sent.text
        again = client.post("/items", files={"image": ("a.png", image, "image/png")}, data={"label": "a"}, headers=form)
        assert again.json() == sent.json()
        other = client.post("/items", files={"image": ("a.png", image, "image/png")}, data={"label": "b"}, headers=form)
        _refused(other, 422, "Idempotency-Key")
        assert _count(client) == GALLERY_SIZE + 2


def test_methods_a_literal_path_does_not_serve_are_405_with_allow(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        options = client.options(DELETE)
        assert options.status_code == 204 and options.headers["allow"] == "OPTIONS, POST"
        for method in ("GET", "DELETE", "PUT"):
            answer = client.request(method, DELETE, headers={"X-API-Key": API_KEY})
            assert answer.status_code == 405, (method, answer.text)
            assert answer.headers["allow"] == "OPTIONS, POST"
        assert client.get("/items/1").status_code == 200  # the id route itself still answers
        assert _count(client) == GALLERY_SIZE


def test_a_vector_scores_at_most_one_against_its_stored_copy(fresh_index: Path) -> None:
    """Issue 54: float16 storage put an item's score against its own vector at 1.0001 (float) and 1.0002
    (binary + rerank), outside the documented -1..1; a score is clipped where hits are made, for every door."""
    dim, rng = _dim(fresh_index), np.random.default_rng(7)
    for _ in range(10_000):  # a unit vector whose float16 copy has a dot product above 1 with it
        vector = rng.standard_normal(dim).astype(np.float32)
        vector /= np.linalg.norm(vector)
        if float(vector.astype(np.float16).astype(np.float32) @ vector) > 1.00005:
            break
    with serving_client(fresh_index) as client:
        added = client.post("/items", json={"items": [{"vector": vector.tolist(), "key": "self"}]}, headers=AUTH)
        assert added.status_code == 201, added.text
        for extra in ({}, {"kind": "binary", "rerank": 20}, {"kind": "binary"}):
            hits = client.post("/search", json={"vector": vector.tolist(), "k": 3, **extra}).json()["results"]
            assert hits[0]["key"] == "self" and hits[0]["score"] == pytest.approx(1.0, abs=1e-4), extra
            assert all(-1.0 <= hit["score"] <= 1.0 for hit in hits), (extra, hits)
