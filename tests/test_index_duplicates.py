"""Copies in a gallery: ``retrieval index duplicates``, the HTTP endpoints and ``collapse_duplicates`` against
brute force over the stored embeddings, with planted copies and the threshold in the model's model.json."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
from duplicates_fixtures import EXACT_PLANTS, NEAR_PLANTS, planted_gallery, planted_threshold
from scipy.sparse.csgraph import connected_components
from serving_fixtures import API_KEY, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing import usecases as api
from retrieval.indexing.exported_model.copy_threshold import CopyThreshold, ThresholdRates
from retrieval.indexing.exported_model.model_manifest import ModelManifest, manifest_json
from retrieval.indexing.store.backends import open_store


@pytest.fixture(scope="module")
def planted_index(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple[Path, float]:
    """An index of the planted gallery, its model's model.json holding a copy threshold that every plant clears."""
    root = tmp_path_factory.mktemp("planted_index")
    data = planted_gallery(root / "data")
    model = Path(shutil.copytree(tiny_model_dir, root / "model"))
    threshold = planted_threshold(model, data)
    rates = ThresholdRates(threshold=threshold, copy_recall=1.0, distinct_rate=0.0)
    measured = CopyThreshold(float_threshold=rates, binary_threshold=rates, images=4, copies=16, distinct_pairs=6)
    manifest = ModelManifest.load(model).model_copy(update={"duplicates": measured})
    (model / "model.json").write_text(manifest_json(manifest))
    api.build_index(model, data, root / "index", progress=False)
    return root / "index", threshold


def brute_groups(index: Path, threshold: float) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    with open_store(index) as store:
        ids = np.asarray(store.ids())
        vectors = np.asarray(store.embeddings_of(ids), np.float32)
    cosine = vectors @ vectors.T
    _, component = connected_components(cosine >= threshold, directed=False)
    groups = [sorted(ids[component == c].tolist()) for c in np.unique(component)]
    groups = sorted((g for g in groups if len(g) > 1), key=lambda g: (-len(g), g[0]))
    return groups, ids, cosine


def path_ids(index: Path) -> dict[str, int]:
    with open_store(index) as store:
        return {
            Path(item.path).relative_to(Path(item.path).parents[1]).as_posix(): item.id for item in store.all_items()
        }


def test_groups_are_brute_force_components_and_hold_every_plant(planted_index: tuple[Path, float]) -> None:
    index, threshold = planted_index
    found = api.find_index_duplicates(index, progress=False)
    expected, _, _ = brute_groups(index, threshold)
    assert found.groups == expected
    ids = path_ids(index)
    grouped = {item: n for n, group in enumerate(found.groups) for item in group}
    for copy, original in {**EXACT_PLANTS, **NEAR_PLANTS}.items():
        assert grouped[ids[copy]] == grouped[ids[original]]


def test_cli_writes_one_row_per_grouped_item(planted_index: tuple[Path, float], tmp_path: Path) -> None:
    index, threshold = planted_index
    result = CliRunner().invoke(app, ["index", "duplicates", str(index), "--out", str(tmp_path / "g.csv"), "--quiet"])
    assert result.exit_code == 0, result.output
    with open(tmp_path / "g.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    expected, _, _ = brute_groups(index, threshold)
    assert [int(row["id"]) for row in rows] == [item for group in expected for item in group]
    assert [int(row["size"]) for row in rows] == [len(group) for group in expected for _ in group]
    bad = CliRunner().invoke(
        app, ["index", "duplicates", str(index), "--out", str(tmp_path / "x.csv"), "--threshold", "-3"]
    )
    assert "must be a cosine similarity in [-1, 1], got -3" in str(bad.exception)


def test_collapsed_search_keeps_one_hit_per_group(planted_index: tuple[Path, float]) -> None:
    index, threshold = planted_index
    query = str(Path(index).parent / "data" / "class_0" / "img_0.png")
    plain = api.search(index, query, k=34)[0]  # every item: the collapse is checked over the whole ranking
    collapsed = api.search(index, query, k=34, collapse_duplicates=True)[0]
    _, ids, cosine = brute_groups(index, threshold)
    row = {int(item_id): n for n, item_id in enumerate(ids)}
    kept = []  # brute force: walk the ranking, keep a hit unless it is linked to a kept one through the hits
    ranked = [hit.item.id for hit in plain]
    hits_graph = cosine[np.ix_([row[i] for i in ranked], [row[i] for i in ranked])] >= threshold
    _, component = connected_components(hits_graph, directed=False)
    seen = set()
    for position, item_id in enumerate(ranked):
        if component[position] not in seen:
            seen.add(component[position])
            kept.append(item_id)
    assert [hit.item.id for hit in collapsed] == kept
    assert len(collapsed) < len(plain)  # the query's own exact copy and the class's near copies collapse


def test_http_groups_pages_and_an_items_copies(planted_index: tuple[Path, float]) -> None:
    index, threshold = planted_index
    expected, ids, cosine = brute_groups(index, threshold)
    with serving_client(index) as client:
        headers = {"X-API-Key": API_KEY}
        first = client.get("/duplicates", params={"limit": 1}, headers=headers)
        assert first.status_code == 200, first.text
        body = first.json()
        assert body["groups_total"] == len(expected)
        assert [item["id"] for item in body["groups"][0]["items"]] == expected[0]
        pages, cursor = [body["groups"]], body["next_cursor"]
        while cursor:
            page = client.get("/duplicates", params={"limit": 1, "cursor": cursor}, headers=headers).json()
            pages.append(page["groups"])
            cursor = page["next_cursor"]
        assert [[i["id"] for i in g["items"]] for p in pages for g in p] == expected
        mixed = client.get("/duplicates", params={"mixed_labels": "true"}, headers=headers).json()["groups"]
        assert all(len({item["label"] for item in group["items"]}) > 1 for group in mixed) and mixed
        item_id = path_ids(index)["class_0/img_0.png"]
        copies = client.get(f"/items/{item_id}/duplicates", headers=headers).json()
        row = {int(i): n for n, i in enumerate(ids)}
        want = {int(i) for i in ids if i != item_id and cosine[row[item_id], row[int(i)]] >= threshold}
        assert {hit["id"] for hit in copies["duplicates"]} == want
        assert client.get("/items/999999/duplicates", headers=headers).status_code == 404
        assert client.get("/duplicates", params={"threshold": 2}, headers=headers).status_code == 422
        assert client.get("/duplicates", params={"cursor": "bogus"}, headers=headers).status_code == 422
        page = client.get("/").text  # the page's groups view and item copies
        assert 'id="show-groups"' in page and "/static/duplicates.js" in page
        assert "/duplicates?" in client.get("/static/duplicates.js").text


def test_http_group_totals_follow_the_filters_and_mixed_groups_are_flagged(planted_index: tuple[Path, float]) -> None:
    """Issue 54: groups_total and duplicated_items counted every group whatever mixed_labels or label asked."""
    index, threshold = planted_index
    expected, _, _ = brute_groups(index, threshold)
    with open_store(index) as store:
        labels = [{item.label for item in store.items(group)} for group in expected]
    with serving_client(index) as client:
        headers = {"X-API-Key": API_KEY}
        for params, wanted in [
            ({"mixed_labels": "true"}, [n for n, found in enumerate(labels) if len(found) > 1]),
            ({"label": "class_3"}, [n for n, found in enumerate(labels) if "class_3" in found]),
            ({}, list(range(len(expected)))),
        ]:
            body = client.get("/duplicates", params={**params, "limit": 1}, headers=headers).json()
            assert 0 < len(wanted) and (len(wanted) < len(expected) or not params)
            assert body["groups_total"] == len(wanted), params
            assert body["duplicated_items"] == sum(len(expected[n]) for n in wanted), params
            assert (body["next_cursor"] is not None) == (len(wanted) > 1)
        every = client.get("/duplicates", params={"limit": 50}, headers=headers).json()["groups"]
        assert [group["mixed_labels"] for group in every] == [len(found) > 1 for found in labels]
