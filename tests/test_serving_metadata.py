"""Per-item metadata through the service: POST /items stores it, lookups and hits return it, and the
searches' ``filter`` keeps k results among the matching items (against a brute-force search)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from index_fixtures import make_image
from serving_fixtures import API_KEY, image_bytes, query_png, serving_client

from retrieval.indexing.store.files.index_store import IndexStore

KEY = {"X-API-Key": API_KEY}


@pytest.fixture(scope="module")
def client(tiny_index_template):
    with serving_client(tiny_index_template) as client:
        yield client


def _brute_force(index_dir, query: np.ndarray, keep, k: int) -> list[int]:
    with IndexStore.open(index_dir) as store:
        ids = np.array([item.id for item in store.all_items() if keep(item)])
        scores = store.embeddings_of(ids) @ query
    return ids[np.argsort(-scores, kind="stable")[:k]].tolist()


def test_search_filter_keeps_k_results_among_the_matches(client, tiny_index_template) -> None:
    data = query_png(2)
    query = np.asarray(client.post("/embed", files={"image": ("q.png", data, "image/png")}).json()["embedding"])
    where = {"n": 2}  # one image of each of the 6 classes
    as_query = {"params": {"k": 4, "filter": json.dumps(where)}}
    as_form = {"params": {"k": 4}, "data": {"filter": json.dumps(where)}}
    for sent in (as_query, as_form):
        body = client.post("/search", files={"image": ("q.png", data, "image/png")}, **sent).json()
        expected = _brute_force(tiny_index_template, query, lambda item: item.metadata.get("n") == 2, 4)
        assert [hit["id"] for hit in body["results"]] == expected
        assert all(hit["metadata"] == {"n": 2} for hit in body["results"])
    by_label = client.post(
        "/search", files={"image": ("q.png", data, "image/png")}, params={"k": 10, "filter": '{"label": "class_4"}'}
    ).json()["results"]
    assert len(by_label) == 5 and {hit["label"] for hit in by_label} == {"class_4"}


def test_similar_filter_and_bad_filters(client, tiny_index_template) -> None:
    with IndexStore.open(tiny_index_template) as store:
        query = store.embedding(3)
    body = client.get("/items/3/similar", params={"k": 3, "filter": '{"label": "class_5"}'}).json()
    expected = _brute_force(tiny_index_template, query, lambda item: item.label == "class_5", 3)
    assert [hit["id"] for hit in body["results"]] == expected
    own_class = client.get("/items/3/similar", params={"k": 10, "filter": '{"label": "class_0"}'}).json()
    assert len(own_class["results"]) == 4 and 3 not in [hit["id"] for hit in own_class["results"]]
    for bad, message in (
        ("{oops", "parameter 'filter' is not valid JSON"),
        ('["label"]', "parameter 'filter' must be a JSON object"),
        ('{"label": 5}', "'label' must be a string"),
        ('{"n": [1, 2]}', "'n' has an array; to match any of several values write"),
    ):
        response = client.get("/items/3/similar", params={"filter": bad})
        assert response.status_code == 422, bad
        assert message in response.json()["detail"]


def test_post_items_stores_metadata_and_filters_find_it(fresh_index) -> None:
    files = [("images", (f"new{i}.png", image_bytes(make_image(1, 50 + i)), "image/png")) for i in range(2)]
    with serving_client(fresh_index) as client:
        one_for_all = client.post(
            "/items",
            files=files,
            data={"labels": "added", "metadata": '{"shop": "berlin", "price": 12.5}'},
            headers=KEY,
        )
        assert one_for_all.status_code == 201, one_for_all.text
        first, second = one_for_all.json()["ids"]
        assert client.get(f"/items/{first}").json()["metadata"] == {
            "shop": "berlin",
            "price": 12.5,
            "filename": "new0.png",
        }
        per_image = client.post(
            "/items",
            files=files[:1],
            data={"labels": "added", "metadata": '[{"shop": "paris", "in_stock": true}]'},
            headers=KEY,
        )
        (third,) = per_image.json()["ids"]
        assert client.get(f"/items/{third}").json()["metadata"]["in_stock"] is True
        search = client.post(
            "/search",
            files={"image": ("q.png", query_png(1), "image/png")},
            params={"k": 10, "filter": '{"shop": "berlin", "price": 12.5}'},
        ).json()["results"]
        assert sorted(hit["id"] for hit in search) == [first, second]
        for metadata, message in (
            ("{not json", "form field 'metadata' is not valid JSON"),
            ('{"label": "x"}', "'label' is reserved"),
            ('[{"a": 1}]', "an array of 2 objects"),
            ('{"a": {"nested": 1}}', "the value of 'a' must be"),
        ):
            refused = client.post("/items", files=files, data={"labels": "x", "metadata": metadata}, headers=KEY)
            assert refused.status_code == 422 and message in refused.json()["detail"], refused.text
        assert client.get("/readyz").json()["count"] == 33  # nothing was added by the refused requests


def test_openapi_documents_metadata_and_filter(client) -> None:
    schema = client.get("/openapi.json").json()
    search = schema["paths"]["/search"]["post"]
    assert any(p["name"] == "filter" and "metadata" in p["description"] for p in search["parameters"])
    similar = schema["paths"]["/items/{item_id}/similar"]["get"]
    assert any(p["name"] == "filter" for p in similar["parameters"])
    form_refs = [
        schema["paths"][path]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
        for path in ("/items", "/search")
    ]
    forms = [schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"] for ref in form_refs]
    assert "metadata" in forms[0]["metadata"]["description"] and "filter" in forms[1]
    assert "metadata" in schema["components"]["schemas"]["SearchHit"]["properties"]["metadata"]["description"]
