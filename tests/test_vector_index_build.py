"""An index built from vectors alone (``retrieval index build --vectors EMB.npy --items ITEMS.csv``): it
answers searches and adds by vector through every door (use case, CLI, Python API, HTTP), its binary codes
are the sign bits of its vectors, ``index info``/``verify`` and the service work on it, and everything that
needs a model is refused in one sentence (a 409 over HTTP, never a 500)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from serving_fixtures import API_KEY, query_png, serving_client
from typer.testing import CliRunner

import retrieval
from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.exported_model.no_model import NoModelError
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.maintenance.index_verify import verify_index
from retrieval.indexing.usecases import add_images
from retrieval.indexing.usecases.build_request import BuildRequest
from retrieval.indexing.usecases.building import run_build
from retrieval.indexing.usecases.vectors import VectorAdd, add_vectors

AUTH = {"X-API-Key": API_KEY}
DIM = 16
runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def _unit(rows: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _write_embedding(folder: Path, vectors: np.ndarray, *, with_keys: bool = True) -> Path:
    """``emb.npy`` + ``emb.items.csv`` in the columns ``retrieval embed`` writes, plus key and metadata."""
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "emb.npy", vectors)
    with open(folder / "emb.items.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "path", "label", "split", *(["key", "metadata", "colour"] if with_keys else [])])
        for row in range(len(vectors)):
            extra = [f"k{row}", json.dumps({"n": row}), "red" if row % 2 else ""] if with_keys else []
            writer.writerow([row * 2, f"/photos/{row}.png", f"class_{row % 3}", "", *extra])
    return folder / "emb.npy"


@pytest.fixture()
def vectors_index(tmp_path: Path) -> tuple[Path, np.ndarray]:
    vectors = _unit(12, seed=3)
    source = _write_embedding(tmp_path / "emb", vectors)
    request = BuildRequest(model=None, data=None, out=tmp_path / "index", vectors=source, items=None, progress=False)
    report = run_build(request)
    assert report.count == 12 and report.num_labels == 3
    return tmp_path / "index", vectors


def test_the_index_holds_the_vectors_items_and_sign_bit_codes(vectors_index: tuple[Path, np.ndarray]) -> None:
    index, vectors = vectors_index
    with IndexStore.open(index) as store:
        ids = store.ids()
        np.testing.assert_allclose(store.embeddings_of(ids), vectors, atol=1e-3)  # float16 as stored
        item = store.item(int(ids[5]))
        assert (item.key, item.label, item.metadata) == ("k5", "class_2", {"n": 5, "colour": "red"})
        assert store.item(int(ids[4])).metadata == {"n": 4}  # an empty cell is no field
        (segment,) = store._set.segments
        for row, item_id in enumerate(ids):
            by_hand = np.packbits(vectors[row] > 0.0, bitorder="little")  # the sign bits, by hand
            assert np.array_equal(segment.binary_index.reconstruct(int(item_id)), by_hand)
        assert not (index / "model").exists()
    assert verify_index(index).items == 12


def test_searches_and_adds_by_vector_and_refuses_what_needs_a_model(
    vectors_index: tuple[Path, np.ndarray], gallery_dir: Path
) -> None:
    index, vectors = vectors_index
    query = _unit(1, seed=9)[0]
    outcome = retrieval.search(index, vectors=query, k=3)
    wanted = np.argsort(-(vectors @ query), kind="stable")[:3]
    with IndexStore.open(index) as store:
        assert [item.id for item, _ in outcome[0]] == store.ids()[wanted].tolist()
    added = add_vectors(index, VectorAdd(query, "new", keys=["fresh"]))
    assert added.count == 13
    assert retrieval.search(index, vectors=query, k=1)[0][0][0].key == "fresh"
    with pytest.raises(NoModelError, match="built from vectors alone and has no model") as refused:
        retrieval.search(index, [gallery_dir / "class_0" / "img_0.png"])
    assert str(refused.value).count(". ") == 0  # one sentence
    with pytest.raises(NoModelError):
        add_images(index, gallery_dir, progress=False)


def test_the_build_request_rules(tmp_path: Path, tiny_model_dir: Path) -> None:
    source = _write_embedding(tmp_path / "emb", _unit(3, seed=1))
    out = tmp_path / "index"
    with pytest.raises(ConfigError, match="without --model and --data"):
        BuildRequest(model=tiny_model_dir, data=None, out=out, vectors=source)
    with pytest.raises(ConfigError, match="--model and --data .* or --vectors"):
        BuildRequest(model=None, data=None, out=out)
    with pytest.raises(ConfigError, match="give --vectors too"):
        BuildRequest(model=tiny_model_dir, data=tmp_path, out=out, items=tmp_path / "emb" / "emb.items.csv")
    with pytest.raises(ConfigError, match="leave out --shard"):
        BuildRequest(model=None, data=None, out=out, vectors=source, shard="0/2")
    short = tmp_path / "short.csv"
    short.write_text("key,label\na,x\n")
    with pytest.raises(DataError, match="1 rows for 3 vectors"):
        run_build(BuildRequest(model=None, data=None, out=out, vectors=source, items=short, progress=False))
    bad = tmp_path / "bad.npy"
    np.save(bad, np.full((2, DIM), np.nan, dtype=np.float32))
    with pytest.raises(DataError, match="not a finite number"):
        run_build(BuildRequest(model=None, data=None, out=out, vectors=bad, progress=False))
    assert not out.exists()  # nothing written by a refused build


def test_cli_builds_searches_shows_and_verifies(tmp_path: Path, gallery_dir: Path) -> None:
    vectors = _unit(6, seed=4)
    source = _write_embedding(tmp_path / "emb", vectors, with_keys=False)
    index = tmp_path / "index"
    built = invoke("index", "build", "--vectors", source, "--items", source.with_suffix(".items.csv"), "--out", index)
    assert built.exit_code == 0, built.output
    assert "indexed 6 vectors of 3 classes" in built.output and "no model" in built.output
    np.save(tmp_path / "q.npy", vectors[4])
    found = invoke("search", index, "--vector", tmp_path / "q.npy", "--k", "1", "--json")
    assert found.exit_code == 0, found.output
    assert "/photos/4.png" in found.output  # the item of the vector searched: the path embed wrote
    assert invoke("index", "info", index).exit_code == 0
    verified = invoke("index", "verify", index, "--deep")
    assert verified.exit_code == 0, verified.output
    refused = invoke("search", index, gallery_dir / "class_0" / "img_0.png")
    assert isinstance(refused.exception, NoModelError)  # main() prints its one sentence, no traceback
    mixed = invoke("index", "build", "--vectors", source, "--data", gallery_dir, "--out", tmp_path / "other")
    assert isinstance(mixed.exception, ConfigError) and "without --model and --data" in str(mixed.exception)


def test_the_service_serves_vectors_and_refuses_images(vectors_index: tuple[Path, np.ndarray]) -> None:
    index, vectors = vectors_index
    with serving_client(index) as client:
        ready = client.get("/readyz").json()
        assert ready["has_model"] is False and ready["embedding_dim"] == DIM and ready["count"] == 12
        found = client.post("/search", json={"vector": vectors[7].tolist(), "k": 1})
        assert found.status_code == 200 and found.json()["results"][0]["key"] == "k7"
        added = client.post("/items", json={"items": [{"vector": vectors[0].tolist(), "key": "again"}]}, headers=AUTH)
        assert added.status_code == 201, added.text
        png = {"image": ("q.png", query_png(), "image/png")}
        for path, extra in (("/search", {}), ("/embed", {}), ("/items", {"headers": AUTH, "data": {"label": "x"}})):
            refused = client.post(path, files=png, **extra)
            assert refused.status_code == 409, (path, refused.text)
            assert "has no model" in refused.json()["detail"]
        keyed = client.put("/items/by-key/k1", files=png, data={"label": "x"}, headers=AUTH)
        assert keyed.status_code == 409 and "has no model" in keyed.json()["detail"]


def test_duplicates_on_vectors_alone_take_a_threshold_and_without_one_say_what_to_pass(tmp_path: Path) -> None:
    vectors = _unit(12, seed=5)
    vectors[10] = vectors[3]  # planted copies: one exact, one a hair apart
    nudged = vectors[5] + 0.01 * _unit(1, seed=6)[0]
    vectors[11] = nudged / np.linalg.norm(nudged)
    source = _write_embedding(tmp_path / "emb", vectors)
    index = tmp_path / "index"
    run_build(BuildRequest(model=None, data=None, out=index, vectors=source, items=None, progress=False))
    with IndexStore.open(index) as store:
        ids = [int(i) for i in store.ids()]
    cosine = vectors @ vectors.T
    brute = sorted(sorted(ids[j] for j in (a, b)) for a, b in zip(*np.nonzero(np.triu(cosine >= 0.95, k=1))))
    assert brute == sorted([sorted([ids[3], ids[10]]), sorted([ids[5], ids[11]])])
    found = invoke("index", "duplicates", index, "--threshold", "0.95", "--out", tmp_path / "d.csv")
    assert found.exit_code == 0, found.output  # was: "the model it was built with (.../vec.npy) is gone"
    assert "2 groups of copies hold 4 of 12 items" in found.output
    missing = invoke("index", "duplicates", index, "--out", tmp_path / "e.csv")
    assert "built from vectors alone, so no model measured a copy threshold" in str(missing.exception)
    assert "is gone" not in str(missing.exception)
    with serving_client(index) as client:
        groups = client.get("/duplicates", params={"threshold": 0.95}, headers=AUTH)
        assert groups.status_code == 200, groups.text
        assert sorted(sorted(item["id"] for item in g["items"]) for g in groups.json()["groups"]) == brute
        unasked = client.get("/duplicates", headers=AUTH)
        assert unasked.status_code == 422 and "query parameter threshold" in unasked.json()["detail"]
        collapsed = client.get(f"/items/{ids[3]}/similar", params={"k": 3, "collapse_duplicates": "true"})
        assert collapsed.status_code == 409  # was 503 "retry later": retrying never changes it
        assert (
            "collapse_duplicates needs a copy threshold, and this index was built from vectors alone"
            in (collapsed.json()["detail"])
        )
        assert "search without collapse_duplicates" in collapsed.json()["detail"]


def test_an_item_added_by_vector_is_no_missing_image_and_its_thumbnail_says_it_has_none(
    vectors_index: tuple[Path, np.ndarray],
) -> None:
    index, vectors = vectors_index
    added = add_vectors(index, VectorAdd(vectors[0], "new", keys=["by-vector"]))
    report = verify_index(index)
    assert report.missing_count == 12  # the /photos/... paths the embedding file named: gone indeed
    assert report.vector_items == 1 and not any("(vector)" in line for line in report.missing_images)
    (new_id,) = added.ids
    with serving_client(index) as client:
        for path in (f"/items/{new_id}/thumbnail", f"/items/{new_id}/image"):
            answer = client.get(path)
            assert answer.status_code == 404, path
            assert answer.json()["detail"] == f"item {new_id} was added by its vector and has no image."


def test_min_probability_on_vectors_alone_is_the_same_400_on_every_door_with_the_reason_that_fits(
    vectors_index: tuple[Path, np.ndarray],
) -> None:
    index, vectors = vectors_index
    with IndexStore.open(index) as store:
        first = int(store.ids()[0])
    with serving_client(index) as client:
        by_json = client.post("/search", json={"vector": vectors[1].tolist(), "min_probability": 0.5})
        by_query = client.get(f"/items/{first}/similar", params={"min_probability": 0.5})
        assert by_json.status_code == by_query.status_code == 400  # JSON was 422, query parameters 400
        detail = by_json.json()["detail"]
        assert detail == by_query.json()["detail"]
        assert "built from vectors alone" in detail and "--split none" not in detail  # was: blamed --split none
    shown = invoke("index", "info", index).output
    assert "calibration" in shown and "built from vectors alone: no model" in shown
