"""The milvus backend on the embedded milvus-lite: the same answers as faiss on the same vectors.

Binary search must equal faiss ``IndexBinaryFlat`` and float search ``IndexFlatIP`` (ids and scores,
ties aside); filters must select exactly what ``items_db`` (the files backend's rule) selects;
add / remove / a restart of the embedded server keep it consistent; and the CLI builds a milvus
index that ``retrieval search`` and the FastAPI service use unchanged.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import faiss
import numpy as np
import pytest
from index_fixtures import export_tiny_model, make_gallery, make_image
from serving_fixtures import API_KEY, image_bytes, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.search.binary import binarize, hamming_to_similarity
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.store.milvus.milvus_build import MilvusTarget
from retrieval.indexing.store.milvus.milvus_store import MilvusStore
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, parse_filter
from retrieval.indexing.store.shared.items.items_db import ItemsDb

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pymilvus") is None or importlib.util.find_spec("milvus_lite") is None,
    reason="pymilvus / milvus-lite are not installed (the milvus extra: pip install -e '.[milvus]')",
)
DIM = 2048  # the 2048-bit codes of a ResNet-50-sized embedding
ADDED = 400
VALUES = [3, 3.0, 1, True, False, None, "3", "a\nb", 'q"\\', "é", 2**62]


def _records(root: Path, count: int, seed: int) -> list[ImageRecord]:
    rng = np.random.default_rng(seed)
    return [
        ImageRecord(
            path=root / f"r{seed}_{i}.png",
            label=f"label_{i % 7}",
            metadata={"v": VALUES[int(rng.integers(len(VALUES)))], "even": i % 2 == 0},
        )
        for i in range(count)
    ]


def _vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _build(root: Path, model_dir: Path) -> tuple[Path, list[ImageRecord]]:
    """A milvus index of the generated gallery (30 images) plus ADDED random items."""
    gallery = make_gallery(root / "gallery", num_classes=3, per_class=4)
    target = MilvusTarget.of(str(root / "milvus.db"), "items", root / "index")
    build_index(model_dir, gallery, root / "index", progress=False, target=target)
    added = _records(root, ADDED, seed=1)
    with open_store(root / "index") as store:
        store.add(added, _vectors(ADDED, seed=1))
    return root / "index", gallery + added


@pytest.fixture(scope="module")
def model_2048(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_tiny_model(tmp_path_factory.mktemp("model2048") / "export", dim=DIM)


@pytest.fixture(scope="module")
def shared_index(model_2048: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ImageRecord]]:
    return _build(tmp_path_factory.mktemp("milvus"), model_2048)


@pytest.fixture(scope="module")
def store(shared_index: tuple[Path, list[ImageRecord]]):
    with open_store(shared_index[0]) as opened:
        yield opened


def _faiss_binary(ids: np.ndarray, vectors: np.ndarray) -> faiss.IndexBinary:
    index = faiss.IndexBinaryIDMap2(faiss.IndexBinaryFlat(DIM))
    index.add_with_ids(binarize(vectors), ids)
    return index


def _faiss_float(ids: np.ndarray, vectors: np.ndarray) -> faiss.Index:
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    index.add_with_ids(vectors, ids)
    return index


def _assert_same_ranking(got_ids, got_scores, want_ids, want_scores, atol: float) -> None:
    """Scores equal; ids equal wherever a score is not tied (within atol) with another in the row."""
    np.testing.assert_allclose(got_scores, want_scores, atol=atol, rtol=0)
    for row in range(len(got_ids)):
        scores = want_scores[row]
        for j, score in enumerate(scores):
            tied = np.sum(np.abs(scores - score) <= atol) > 1 or (j == len(scores) - 1)
            if not tied:
                assert got_ids[row, j] == want_ids[row, j], (row, j)


def test_is_a_milvus_store_with_all_items(store: MilvusStore, shared_index) -> None:
    assert isinstance(store, MilvusStore) and store.count == 12 + ADDED
    assert store.ids().tolist() == list(range(1, 12 + ADDED + 1))
    items = store.items([1, 13, 10**9])
    assert items[0].label == "class_0" and items[1].label == "label_0" and items[2] is None
    assert items[1].metadata == json.loads(json.dumps(shared_index[1][12].metadata))


def test_binary_search_equals_faiss_binary_flat(store: MilvusStore) -> None:
    ids = store.ids()
    vectors = store.embeddings_of(ids)
    queries = _vectors(25, seed=7)
    got = store.search(queries, 10, kind="binary")
    distances, want_ids = _faiss_binary(ids, vectors).search(binarize(queries), 10)
    want_scores = hamming_to_similarity(distances, DIM)
    _assert_same_ranking(got.ids, got.scores, want_ids, want_scores, atol=0)
    bits = np.unpackbits(binarize(vectors), axis=1)
    query_bits = np.unpackbits(binarize(queries), axis=1)
    position = {int(i): n for n, i in enumerate(ids)}
    for row in range(len(queries)):  # tied ids too: each returned id has the distance its score says
        true = [(bits[position[int(i)]] != query_bits[row]).sum() for i in got.ids[row]]
        np.testing.assert_array_equal(hamming_to_similarity(np.asarray(true), DIM), got.scores[row])


def test_float_search_equals_faiss_flat_ip(store: MilvusStore) -> None:
    ids = store.ids()
    vectors = store.embeddings_of(ids)
    queries = _vectors(25, seed=8)
    got = store.search(queries, 10, kind="float")
    scores, want_ids = _faiss_float(ids, vectors).search(queries, 10)
    _assert_same_ranking(got.ids, got.scores, want_ids, scores, atol=1e-5)


def test_rerank_reorders_the_hamming_shortlist_by_cosine(store: MilvusStore) -> None:
    ids = store.ids()
    vectors = store.embeddings_of(ids)
    queries = _vectors(5, seed=9)
    got = store.search(queries, 5, kind="binary", rerank=50)
    _, shortlist = _faiss_binary(ids, vectors).search(binarize(queries), 50)
    for row, query in enumerate(queries):
        similarity = store.embeddings_of(shortlist[row]) @ query
        order = np.argsort(-similarity)[:5]
        np.testing.assert_allclose(got.scores[row], similarity[order], atol=1e-6)


@pytest.mark.parametrize(
    "where",
    [{"label": "label_3"}, {"v": 3}, {"v": 3.0}, {"v": True}, {"v": None}, {"v": "a\nb"}, {"v": 'q"\\'}, {"v": "é"}]
    + [{"v": 2**62, "even": True}, {"label": "class_1", "n": 2}, {"v": "missing"}],
    ids=repr,
)
def test_filters_select_what_items_db_selects(store: MilvusStore, shared_index, tmp_path: Path, where) -> None:
    db = ItemsDb.create(tmp_path / "items.sqlite")  # the files backend's filter rule, on the same records
    with db.transaction():
        db.insert(shared_index[1], range(len(shared_index[1])))
    item_filter = parse_filter(where)
    assert isinstance(item_filter, ItemFilter)
    allowed = db.matching_ids(item_filter)
    db.close()
    for kind in ("float", "binary"):
        found = store.search(_vectors(3, seed=10), store.count, kind=kind, where=item_filter)  # type: ignore[arg-type]
        for row in found.ids:
            assert sorted(row[row >= 0].tolist()) == allowed.tolist(), (kind, where)
    if len(allowed):
        query = _vectors(1, seed=11)
        got = store.search(query, 5, where=item_filter)
        scores, want = _faiss_float(allowed, store.embeddings_of(allowed)).search(query, min(5, len(allowed)))
        _assert_same_ranking(got.ids[:, : want.shape[1]], got.scores[:, : want.shape[1]], want, scores, atol=1e-5)


def test_add_remove_and_restart_stay_consistent(model_2048: Path, tmp_path: Path) -> None:
    from milvus_lite.server_manager import server_manager_instance

    index_dir, records = _build(tmp_path, model_2048)
    with open_store(index_dir) as store:
        removed = [2, 40, 12 + ADDED]  # the newest item too: its id must not come back
        assert store.remove(removed + [10**6]) == 3 and store.count == 12 + ADDED - 3
        new = store.add(_records(tmp_path, 5, seed=2), _vectors(5, seed=2), idempotency_key="k1")
        assert new == list(range(12 + ADDED + 1, 12 + ADDED + 6))
        assert store.recall("k1") == {"ids": new, "count": 12 + ADDED + 2} and store.recall("k2") is None
        before_ids, before_vectors = store.ids(), store.embeddings_of(store.ids())
    server_manager_instance.release_server(str(tmp_path / "milvus.db"))  # stop the embedded server
    with open_store(index_dir) as store:  # a fresh server on the same file
        assert store.count == len(before_ids) and np.array_equal(store.ids(), before_ids)
        assert not set(removed) & set(store.ids().tolist())
        np.testing.assert_array_equal(store.embeddings_of(before_ids), before_vectors)
        queries = _vectors(10, seed=12)
        got = store.search(queries, 8, kind="binary")
        distances, want = _faiss_binary(before_ids, before_vectors).search(binarize(queries), 8)
        _assert_same_ranking(got.ids, got.scores, want, hamming_to_similarity(distances, DIM), atol=0)
        assert store.recall("k1") is not None
        assert store.add(_records(tmp_path, 1, seed=3), _vectors(1, seed=3)) == [12 + ADDED + 6]


def test_cli_build_search_and_service(tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out, db = tmp_path / "index", tmp_path / "m.db"
    result = runner.invoke(
        app,
        ["index", "build", "--model", str(tiny_model_dir), "--data", str(gallery_dir), "--out", str(out)]
        + ["--backend", "milvus", "--milvus-uri", str(db), "--collection", "gallery", "--quiet"],
    )
    assert result.exit_code == 0, result.output
    assert "indexed 30 images of 6 classes" in result.output and "Milvus collection gallery" in result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["backend"], manifest["milvus_uri"], manifest["milvus_collection"]) == (
        "milvus",
        str(db),
        "gallery",
    )
    assert "milvus: collection gallery" in runner.invoke(app, ["index", "info", str(out)]).output
    query = tmp_path / "query.png"
    make_image(2, 99).save(query)
    searched = runner.invoke(app, ["search", str(out), str(query), "--k", "3", "--json"])
    assert searched.exit_code == 0, searched.output
    cli_hits = json.loads(searched.output)["queries"][0]["results"]
    with serving_client(out) as client:
        body = client.post("/search", files={"image": ("q.png", query.read_bytes(), "image/png")}, params={"k": 3})
        assert body.status_code == 200, body.text
        assert [h["id"] for h in body.json()["results"]] == [h["id"] for h in cli_hits]
        assert body.json()["results"][0]["label"] == "class_2"
        labels = client.get("/labels").json()
        assert sorted((v["value"], v["count"]) for v in labels["values"]) == [(f"class_{i}", 5) for i in range(6)]
        page = client.get("/items", params={"limit": 4, "filter": '{"label": {"$in": ["class_1", "class_3"]}}'}).json()
        assert [item["label"] for item in page["items"]] == ["class_1"] * 4 and page["next_cursor"]
        rest = client.get("/items", params={"cursor": page["next_cursor"], "filter": '{"label": {"$ne": "x"}}'}).json()
        assert [item["id"] for item in rest["items"]] == list(range(page["items"][-1]["id"] + 1, 31))
        cut = client.post(
            "/search",
            files={"image": ("q.png", query.read_bytes(), "image/png")},
            params={"k": 5, "offset": 1, "min_score": 1.0},
        ).json()
        assert cut["results"] == [] and cut["below_min_score"] == 5 and cut["offset"] == 1
        new_image = image_bytes(make_image(5, 77, size=(64, 64)))
        headers = {"X-API-Key": API_KEY}
        added = client.post(
            "/items", files=[("images", ("n.png", new_image, "image/png"))], data={"labels": "new"}, headers=headers
        )
        assert added.status_code == 201 and added.json() == {"ids": [31], "count": 31}
        top = client.post("/search", files={"image": ("n.png", new_image, "image/png")}, params={"k": 1}).json()
        assert top["results"][0]["id"] == 31 and top["results"][0]["score"] == pytest.approx(1.0, abs=1e-5)
        assert client.delete("/items/31", headers=headers).json() == {"id": 31, "key": None, "count": 30}
        put = {"files": {"image": ("k.png", new_image, "image/png")}, "headers": headers}
        created = client.put("/items/by-key/sku-1", data={"label": "first"}, **put)
        assert created.status_code == 201 and created.json() == {
            "id": 32,
            "key": "sku-1",
            "replaced": None,
            "count": 31,
        }
        replaced = client.put("/items/by-key/sku-1", data={"label": "second"}, **put)
        assert replaced.json() == {"id": 32, "key": "sku-1", "replaced": 32, "count": 31}  # the id survives
        shown = client.get("/items/by-key/sku-1").json()
        assert (shown["id"], shown["key"], shown["label"]) == (32, "sku-1", "second")
        taken = client.post(
            "/items",
            files={"image": ("k.png", new_image, "image/png")},
            data={"label": "x", "key": "sku-1"},
            headers=headers,
        )
        assert taken.status_code == 409 and "already item 32" in taken.json()["detail"]
        assert client.delete("/items/by-key/sku-1", headers=headers).json() == {"id": 32, "key": "sku-1", "count": 30}
    removed = runner.invoke(app, ["index", "remove", str(out), "1"])
    assert removed.exit_code == 0 and "now holds 29" in removed.output
    with open_store(out) as store:
        assert store.count == 29 and 31 not in store.ids() and 1 not in store.ids()


def test_eval_and_embed_read_a_milvus_index_as_the_files_one(
    tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path
) -> None:
    """`retrieval eval --index` and `retrieval embed --index` give the same numbers on both backends."""
    runner = CliRunner()
    build = ["index", "build", "--model", str(tiny_model_dir), "--data", str(gallery_dir), "--quiet"]
    files, milvus = tmp_path / "files", tmp_path / "milvus"
    assert runner.invoke(app, [*build, "--out", str(files)]).exit_code == 0
    milvus_args = ["--backend", "milvus", "--milvus-uri", str(tmp_path / "m.db")]
    assert runner.invoke(app, [*build, "--out", str(milvus), *milvus_args]).exit_code == 0
    reports = {}
    for name, index in (("files", files), ("milvus", milvus)):
        out = tmp_path / f"eval_{name}"
        result = runner.invoke(app, ["eval", "--index", str(index), "--out", str(out), "--quiet"])
        assert result.exit_code == 0, result.output
        reports[name] = json.loads((out / "metrics.json").read_text())
        embedded = runner.invoke(app, ["embed", "--index", str(index), "--out", str(tmp_path / f"{name}.npy")])
        assert embedded.exit_code == 0, embedded.output
    for kind in ("float", "binary"):
        assert reports["milvus"][kind]["map_at_r"] == pytest.approx(reports["files"][kind]["map_at_r"], abs=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "milvus.npy"), np.load(tmp_path / "files.npy"), atol=1e-3)
    compacted = runner.invoke(app, ["index", "compact", str(milvus)])
    assert isinstance(compacted.exception, ConfigError) and "Milvus merges its own segments" in str(compacted.exception)


def test_milvus_lite_writes_its_logs_beside_its_database_not_into_tmp(tmp_path: Path) -> None:
    import tempfile

    from retrieval.indexing.store.milvus.milvus_client import connect, lite_log_dir

    def tmp_logs() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).glob("milvus*") if p.is_file() or p.is_symlink()}

    before = tmp_logs()
    database = tmp_path / "items.db"
    for _ in range(2):  # each start of the embedded server writes a log file
        connect(str(database)).close()
    assert tmp_logs() - before == set()
    logs = lite_log_dir(str(database))
    assert logs.parent == tmp_path and any(logs.iterdir())


def test_a_collection_written_before_the_filter_marks_refuses_ranges_not_equality(
    model_2048: Path, tmp_path: Path
) -> None:
    from retrieval.indexing.common.errors import DataError
    from retrieval.indexing.store.milvus.milvus_filter import filter_keys as marked_keys
    from retrieval.indexing.store.milvus.milvus_filter import text_key, value_key

    index_dir, _ = _build(tmp_path, model_2048)
    with open_store(index_dir) as store:
        assert isinstance(store, MilvusStore)
        fields = ["id", "path", "path_key", "label", "split", "is_query", "is_gallery", "metadata", "code", "vector"]
        fields += ["key", "key_hash"]
        (row,) = store._client.query(store.collection, filter="id == 1", output_fields=fields)
        old_keys = {text_key(k): value_key(v) for k, v in {**row["metadata"], "label": row["label"]}.items()}
        assert old_keys.items() <= marked_keys(row["label"], row["metadata"]).items()
        code = row["code"][0] if isinstance(row["code"], list) else row["code"]
        store._client.upsert(store.collection, data=[{**row, "code": bytes(code), "filter_keys": old_keys}])  # old
    with open_store(index_dir) as store:
        with pytest.raises(DataError, match="rebuild it"):
            store.search(_vectors(1, seed=3), 3, where=parse_filter({"even": {"$exists": True}}))
        found = store.search(_vectors(1, seed=3), 3, where=parse_filter({"label": row["label"]}))
        assert len(found.ids[0]) == 3
        assert store.keys_in_use(["nowhere"]) == {"nowhere"}  # cannot tell: no false warning


def test_a_collection_built_before_item_keys_reads_keyless_and_refuses_keys(
    model_2048: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functools import partial

    from retrieval.indexing.common.errors import DataError
    from retrieval.indexing.store.milvus import milvus_build, milvus_client

    new_schema = milvus_client._items_schema

    def old_schema(module: object, dim: int, bits: int) -> object:
        schema = new_schema(module, dim, bits)
        schema._fields = [field for field in schema.fields if field.name not in ("key", "key_hash")]
        return schema

    monkeypatch.setattr(milvus_client, "_items_schema", old_schema)
    monkeypatch.setattr(milvus_build, "item_rows", partial(milvus_build.item_rows, keyed=False))
    gallery = make_gallery(tmp_path / "gallery", num_classes=2, per_class=2)
    target = MilvusTarget.of(str(tmp_path / "milvus.db"), "old", tmp_path / "index")
    build_index(model_2048, gallery, tmp_path / "index", progress=False, target=target)
    monkeypatch.undo()
    with open_store(tmp_path / "index") as store:
        assert {item.key for item in store.all_items()} == {None} and store.ids_of_keys(["a"]) == {}
        vectors = _vectors(2, seed=4)
        (added,) = store.add([ImageRecord(path=tmp_path / "x.png", label="x")], vectors[:1])
        assert store.item(added).key is None and store.search(vectors[:1], 1).ids[0, 0] == added
        with pytest.raises(DataError, match="built before item keys existed; rebuild it"):
            store.add([ImageRecord(path=tmp_path / "y.png", label="y", key="a")], vectors[1:])
        assert store.count == len(gallery) + 1


@pytest.mark.parametrize("crash", ["before the upsert", "after the upsert"])
def test_a_replace_a_crash_interrupted_leaves_one_item_under_the_key_and_its_id(
    model_2048: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash: str
) -> None:
    """A replace upserts the new row under the old item's id (atomic per row in Milvus): killed before,
    the old item stays; killed after its upsert, the new one holds the key. Either way one item, one id."""
    from dataclasses import replace

    index_dir, _ = _build(tmp_path, model_2048)
    old, new = (replace(r, key="sku") for r in _records(tmp_path, 2, seed=4))
    vectors = _vectors(2, seed=4)
    with open_store(index_dir) as store:
        (old_id,) = store.add([old], vectors[:1])
        real_upsert = store._client.upsert

        def killed(*args, **kwargs):
            if crash == "after the upsert":
                real_upsert(*args, **kwargs)
            raise KeyboardInterrupt("killed")

        monkeypatch.setattr(store._client, "upsert", killed)
        with pytest.raises(KeyboardInterrupt):
            store.add([new], vectors[1:], replace=True)
        monkeypatch.undo()
    with open_store(index_dir) as store:
        assert store.ids_of_keys(["sku"]) == {"sku": old_id} and store.count == 12 + ADDED + 1
        assert store.item(old_id).path == str((old if crash == "before the upsert" else new).path)
