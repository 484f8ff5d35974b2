"""The vector-database calls of the service: ``GET /labels``, ``GET /items`` behind a cursor, and the
searches' ``offset``, ``min_score`` and filter warnings, each against a brute-force answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from serving_fixtures import GALLERY_SIZE, query_png, serving_client

from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest
from retrieval.serving.routes.routes_browse import make_cursor


@pytest.fixture(scope="module")
def client(tiny_index_template):
    with serving_client(tiny_index_template) as client:
        yield client


def _search(client, **params) -> tuple[int, dict]:
    response = client.post("/search", files={"image": ("q.png", query_png(2), "image/png")}, params=params)
    return response.status_code, response.json()


def _all_scores(client) -> list[tuple[int, float]]:
    _, body = _search(client, k=GALLERY_SIZE)
    return [(hit["id"], hit["score"]) for hit in body["results"]]


def test_labels_and_metadata_values_are_counted(client) -> None:
    body = client.get("/labels").json()
    assert body["key"] == "label" and body["distinct"] == 6
    assert sorted((v["value"], v["count"]) for v in body["values"]) == [(f"class_{i}", 5) for i in range(6)]
    assert [v["value"] for v in client.get("/labels", params={"prefix": "CLASS_3"}).json()["values"]] == ["class_3"]
    by_n = client.get("/labels", params={"key": "n"}).json()
    assert by_n["key"] == "n" and by_n["values"] == [{"value": i, "count": 6} for i in range(5)]
    assert client.get("/labels", params={"key": "colour"}).json()["values"] == []
    assert len(client.get("/labels", params={"limit": 2}).json()["values"]) == 2
    bad = client.get("/labels", params={"key": 'a"b'})
    assert bad.status_code == 422 and "without double quotes" in bad.json()["detail"]


def test_items_page_by_cursor_through_every_match(client) -> None:
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 4, "filter": '{"n": {"$gte": 3}}', **({"cursor": cursor} if cursor else {})}
        body = client.get("/items", params=params).json()
        seen += [(item["id"], item["metadata"]["n"]) for item in body["items"]]
        cursor, pages = body["next_cursor"], pages + 1
        if cursor is None:
            break
    assert [item_id for item_id, _ in seen] == [i + 1 for i in range(GALLERY_SIZE) if i % 5 >= 3]
    assert pages == 3 and all(n >= 3 for _, n in seen)
    everything = client.get("/items", params={"limit": 1000}).json()
    assert [item["id"] for item in everything["items"]] == list(range(1, GALLERY_SIZE + 1))
    assert everything["next_cursor"] is None and everything["items"][0]["thumbnail_url"] == "/items/1/thumbnail"


def test_a_cursor_stays_valid_across_writes_but_not_across_builds(fresh_index: Path, tmp_path: Path) -> None:
    with serving_client(fresh_index) as client:
        first = client.get("/items", params={"limit": 10}).json()
        with IndexStore.open(fresh_index) as store:
            store.remove([5, 12])  # an offset would shift; the cursor does not
        client.post("/admin/reload", headers={"X-API-Key": "test-key-0123456789"})
        second = client.get("/items", params={"limit": 10, "cursor": first["next_cursor"]}).json()
        assert [item["id"] for item in second["items"]] == [11, *range(13, 22)]
        other = load_index_manifest(fresh_index).model_copy(update={"build_id": "another build"})
        stale = client.get("/items", params={"cursor": make_cursor(10, other)})
        assert stale.status_code == 422 and "another build of the index" in stale.json()["detail"]
        for bad in ("not a cursor", "eyJhIjoxfQ", "e30"):
            response = client.get("/items", params={"cursor": bad})
            assert (
                response.status_code == 422 and "cursor is not one this service gave out" in response.json()["detail"]
            )
    shutil.rmtree(fresh_index)


def test_offset_pages_through_the_ranking(client) -> None:
    ranking = _all_scores(client)
    status, body = _search(client, k=5, offset=7)
    assert status == 200 and body["offset"] == 7
    assert [hit["id"] for hit in body["results"]] == [item_id for item_id, _ in ranking[7:12]]
    similar = client.get("/items/3/similar", params={"k": 3, "offset": 2}).json()
    full = client.get("/items/3/similar", params={"k": 5}).json()
    assert [h["id"] for h in similar["results"]] == [h["id"] for h in full["results"][2:5]]
    status, body = _search(client, k=5, offset=GALLERY_SIZE - 2)
    assert status == 200 and len(body["results"]) == 2


def test_min_score_keeps_the_hits_at_or_above_it_and_counts_the_cut(client) -> None:
    ranking = _all_scores(client)
    threshold = float(np.median([score for _, score in ranking[:10]]))
    status, body = _search(client, k=10, min_score=threshold)
    kept = [item_id for item_id, score in ranking[:10] if score >= threshold]
    assert status == 200 and [hit["id"] for hit in body["results"]] == kept
    assert body["below_min_score"] == 10 - len(kept) and body["min_score"] == threshold
    similar = client.get("/items/3/similar", params={"k": 10, "min_score": 1.0}).json()
    assert similar["results"] == [] and similar["below_min_score"] == 10
    for bad in ({"min_score": 1.5}, {"min_score": -2}, {"min_score": "nan"}, {"offset": -1}, {"offset": 1000}):
        status, body = _search(client, k=5, **bad)
        assert status == 422, bad
        assert "min_score" in body["detail"] or "offset" in body["detail"], body


def test_filters_use_operators_and_warn_about_unknown_keys(client) -> None:
    status, body = _search(client, k=30, filter=json.dumps({"label": {"$in": ["class_1", "class_4"]}, "n": {"$lt": 2}}))
    assert status == 200 and body["warnings"] == []
    assert sorted(hit["id"] for hit in body["results"]) == [6, 7, 21, 22]
    status, body = _search(client, k=5, filter='{"colour": "red"}')
    assert status == 200 and body["results"] == []
    assert body["warnings"] == ["no item has the metadata key 'colour'; the keys in use: n"]
    listed = client.get("/items", params={"filter": '{"colour": {"$exists": false}}', "limit": 2}).json()
    assert len(listed["items"]) == 2 and "'colour'" in listed["warnings"][0]
    for bad, message in (
        ('{"n": {"$regex": "1"}}', "'$regex' under 'n' is not an operator"),
        ('{"n": {"$gt": "1"}}', "$gt takes a number"),
        ('{"n": [1, 2]}', '"$in"'),
    ):
        for response in (_search(client, k=5, filter=bad), client.get("/items", params={"filter": bad})):
            status, body = response if isinstance(response, tuple) else (response.status_code, response.json())
            assert status == 422 and message in body["detail"], body


def test_hostile_discovery_parameters_are_4xx(client) -> None:
    hostile = [
        "/labels?key=%00",
        "/labels?key=" + "k" * 500,
        "/labels?key=&limit=0",
        "/labels?prefix=%00&limit=99999999999999999999",
        "/items?limit=0",
        "/items?limit=1001",
        "/items?cursor=" + "A" * 300,
        "/items?cursor=eyJiIjoiIiwiYSI6OTk5OTk5OTk5OTk5OTk5OTk5OTk5fQ",
        "/items?cursor=%ED%A0%80",
        "/items?filter=" + "%5B" * 3000,
        "/items?filter=%7B%22n%22%3A%7B%22%24in%22%3A%5B%5D%7D%7D",
        "/items/3/similar?offset=99999999999999999999999",
        "/items/3/similar?min_score=inf",
        "/items/3/similar?min_score=-1e400",
    ]
    for url in hostile:
        response = client.get(url)
        assert 400 <= response.status_code < 500, (url, response.status_code, response.text)
        assert response.headers["content-type"].startswith("application/problem+json"), url
