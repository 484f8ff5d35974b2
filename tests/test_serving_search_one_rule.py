"""The two bodies of ``POST /search`` (a form of images or words, a JSON body of vectors or words) follow one
rule, and the newer doors answer as the older ones (#54, items 5, 9 and 11): query parameters count for both
(and a setting sent twice is refused by both), ``collapse_duplicates`` is taken by both, a by-key item comes
with its vector as an item by id does, and a form field no route takes is refused as a JSON key is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from serving_fixtures import API_KEY, query_png, serving_client

AUTH = {"X-API-Key": API_KEY}


def _image_vector(client) -> list[float]:
    embedded = client.post("/embed", files={"image": ("q.png", query_png(), "image/png")})
    assert embedded.status_code == 200, embedded.text
    return embedded.json()["embedding"]


def test_query_parameters_count_for_json_as_for_forms(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        vector = _image_vector(client)
        by_json = client.post("/search", params={"k": 3}, json={"vector": vector})
        by_form = client.post("/search", params={"k": 3}, files={"image": ("q.png", query_png(), "image/png")})
        assert by_json.status_code == by_form.status_code == 200, by_json.text
        assert [hit["id"] for hit in by_json.json()["results"]] == [hit["id"] for hit in by_form.json()["results"]]
        assert len(by_json.json()["results"]) == 3 and by_json.json()["k"] == 3

        twice_json = client.post("/search", params={"k": 3}, json={"vector": vector, "k": 4})
        twice_form = client.post(
            "/search", params={"k": 3}, data={"k": "4"}, files={"image": ("q.png", query_png(), "image/png")}
        )
        assert twice_json.status_code == twice_form.status_code == 422
        assert "'k' was sent both as a query parameter" in twice_json.json()["detail"]
        assert "'k' was sent both as a query parameter" in twice_form.json()["detail"]


def test_collapse_duplicates_is_taken_by_json_as_by_forms(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        vector = _image_vector(client)
        by_json = client.post("/search", json={"vector": vector, "k": 5, "collapse_duplicates": True})
        by_form = client.post(
            "/search",
            params={"k": 5, "collapse_duplicates": "true"},
            files={"image": ("q.png", query_png(), "image/png")},
        )
        assert by_json.status_code == by_form.status_code, (by_json.text, by_form.text)
        assert by_json.status_code != 422, by_json.text
        if by_json.status_code == 200:
            assert [hit["id"] for hit in by_json.json()["results"]] == [hit["id"] for hit in by_form.json()["results"]]
        else:
            assert by_json.json()["detail"] == by_form.json()["detail"]


def test_an_item_by_key_comes_with_its_vector_as_by_id(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        vector = np.asarray(_image_vector(client))
        put = client.put("/items/by-key/sku-1", json={"vector": vector.tolist(), "label": "v"}, headers=AUTH)
        assert put.status_code == 201, put.text
        by_id = client.get(f"/items/{put.json()['id']}", params={"with_vectors": "true"}).json()
        by_key = client.get("/items/by-key/sku-1", params={"with_vectors": "true"})
        assert by_key.status_code == 200 and by_key.json() == by_id
        assert np.allclose(by_key.json()["vector"], vector, atol=1e-3)
        assert "vector" not in client.get("/items/by-key/sku-1").json()


def test_a_form_field_no_route_takes_is_a_422_naming_it_and_the_known_ones(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        found = client.post(
            "/search", data={"vector": "[0.1, 0.2]"}, files={"image": ("q.png", query_png(), "image/png")}
        )
        assert found.status_code == 422, found.text
        detail = found.json()["detail"]
        assert "form field 'vector' is not one this endpoint takes" in detail
        assert "'image'" in detail and "'text'" in detail and "'k'" in detail

        added = client.post(
            "/items", data={"lable": "x"}, files={"image": ("q.png", query_png(), "image/png")}, headers=AUTH
        )
        assert added.status_code == 422 and "form field 'lable'" in added.json()["detail"]
        assert "'label'" in added.json()["detail"]
        assert client.get("/items", params={"limit": 1}).status_code == 200
