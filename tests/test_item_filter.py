"""Item metadata rules and filtered search: every index kind against a brute-force filtered search."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from index_fixtures import make_image
from reference_hamming import hamming_distances
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.build.builder import write_index
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.files.faiss_search import filtered_search, segment_searcher
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, parse_filter, parse_metadata

N, DIM, K = 1200, 64, 10
COLOURS = ("red", "green", "blue")
# (float kind, binary kind): every kind of each family appears once
KINDS = [("flat", "flat"), ("ivf", "hnsw"), ("hnsw", "ivf"), ("ivfpq", "flat")]
FILTERS = [
    {"color": "red"},  # a third of the items
    {"label": "c07"},  # 30 items, through the label index
    {"label": "c07", "color": "blue"},  # 10 items: k results from few matches
    {"rare": True},  # 4 items: fewer matches than k
    {"size": 2, "color": "green"},  # numbers by value: 2 matches the stored 2.0
]


def _metadata(i: int) -> dict:
    return {"color": COLOURS[i % 3], "size": float(i % 4), "rare": i % 300 == 0, "shelf": i % 5 or None}


def _allowed(where: dict) -> np.ndarray:
    """The brute-force filter over the generated items (ids are 1..N in insertion order)."""
    keep = []
    for i in range(N):
        fields = {"label": f"c{i % 40:02d}", **_metadata(i)}
        if all(fields.get(k) == v and isinstance(fields.get(k), bool) == isinstance(v, bool) for k, v in where.items()):
            keep.append(i + 1)
    return np.asarray(keep, dtype=np.int64)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(N, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float16).astype(np.float32)  # what the index stores, so brute force sees the same numbers


@pytest.fixture(scope="module", params=KINDS, ids=lambda kinds: "-".join(kinds))
def index_dir(request, vectors: np.ndarray, tiny_model_dir: Path, tmp_path_factory) -> Path:
    records = [ImageRecord(Path(f"/photos/{i}.jpg"), f"c{i % 40:02d}", metadata=_metadata(i)) for i in range(N)]
    out = tmp_path_factory.mktemp("filtered") / "index"
    kinds = (float_kind(request.param[0]), binary_kind(request.param[1]))
    write_index(out, OnnxEmbedder(tiny_model_dir, threads=1), records, vectors, kinds)
    return out


def _brute_force(queries: np.ndarray, vectors: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    similarity = queries @ vectors[allowed - 1].T
    order = np.argsort(-similarity, axis=1, kind="stable")[:, :K]
    return allowed[order], np.take_along_axis(similarity, order, 1)


def test_filtered_float_search_equals_brute_force(index_dir: Path, vectors: np.ndarray, monkeypatch) -> None:
    queries = vectors[:20] + 0.05
    monkeypatch.setattr(filtered_search, "_EXACT_BLOCK_ELEMENTS", DIM * 97)  # exact searches merge 97-item blocks
    exact_calls = _count_exact_searches(monkeypatch)
    with IndexStore.open(index_dir) as store:
        for where in FILTERS:
            allowed = _allowed(where)
            found = store.search(queries, K, where=parse_filter(where))
            assert found.ids.shape == (len(queries), min(K, len(allowed)))
            assert np.isin(found.ids, allowed).all()  # k results, every one passing the filter
            if store.manifest.float_kind != "ivfpq":  # PQ scores are approximate by design
                expected_ids, expected_scores = _brute_force(queries, vectors, allowed)
                np.testing.assert_array_equal(found.ids, expected_ids)
                np.testing.assert_allclose(found.scores, expected_scores, rtol=0, atol=1e-5)
        if store.manifest.float_kind == "flat":
            assert exact_calls == []  # the flat index answers through its id selector alone


def test_selector_path_of_approximate_kinds(index_dir: Path, vectors: np.ndarray, monkeypatch) -> None:
    """With the small-selection shortcut off, IVF and HNSW search through their selectors; rows they
    leave short are completed exactly, so every row still holds min(k, matches) results."""
    monkeypatch.setattr(filtered_search, "EXACT_SEARCH_ELEMENTS", 0)
    queries = vectors[:20] + 0.05
    with IndexStore.open(index_dir) as store:
        for where in FILTERS:
            allowed = _allowed(where)
            for kind in ("float", "binary"):
                found = store.search(queries, K, kind=kind, where=parse_filter(where))
                assert found.ids.shape == (len(queries), min(K, len(allowed)))
                assert np.isin(found.ids, allowed).all()
                assert all(len(set(row)) == len(row) for row in found.ids.tolist())
            found = store.search(queries, K, where=parse_filter(where))
            if store.manifest.float_kind in ("ivf", "hnsw"):  # the scores are the items' true ones
                true = np.einsum("qd,qkd->qk", queries, vectors[found.ids - 1])
                np.testing.assert_allclose(found.scores, true, atol=1e-5)
                if len(allowed) > 100:  # a broad filter loses little to the approximation
                    expected_ids, _ = _brute_force(queries, vectors, allowed)
                    recall = np.mean([len(set(a) & set(b)) / K for a, b in zip(found.ids, expected_ids)])
                    assert recall >= 0.8, (where, recall)


def _count_exact_searches(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = segment_searcher.exact_search

    def counting(queries, *args, **kwargs):
        calls.append(len(queries))
        return real(queries, *args, **kwargs)

    monkeypatch.setattr(segment_searcher, "exact_search", counting)
    return calls


def test_filtered_binary_search_equals_brute_force(index_dir: Path, vectors: np.ndarray, monkeypatch) -> None:
    queries = vectors[20:40] + 0.05
    monkeypatch.setattr(filtered_search, "_EXACT_BLOCK_ELEMENTS", DIM * 97)
    bits = DIM
    with IndexStore.open(index_dir) as store:
        for where in FILTERS:
            allowed = _allowed(where)
            found = store.search(queries, K, kind="binary", where=parse_filter(where))
            assert found.ids.shape == (len(queries), min(K, len(allowed)))
            assert np.isin(found.ids, allowed).all()
            distances = hamming_distances(binarize(queries), binarize(vectors))
            true = 1 - 2 * np.take_along_axis(distances, found.ids - 1, 1) / bits
            np.testing.assert_allclose(found.scores, true, atol=1e-6)  # each score is that item's own
            assert all(len(set(row)) == len(row) for row in found.ids.tolist())
            best = 1 - 2 * np.sort(distances[:, allowed - 1], axis=1)[:, :K] / bits
            np.testing.assert_allclose(found.scores, best, atol=1e-6)  # Hamming ties leave ids ambiguous


def test_a_flat_binary_index_scans_a_small_selection_as_its_selector_would(
    index_dir: Path, vectors: np.ndarray, monkeypatch
) -> None:
    """A selection of at most half a flat binary segment is gathered from the index's own codes and
    scanned (``CodeScan``); the ids and scores are those of faiss's search through the id selector."""
    queries = vectors[40:60] + 0.05
    scans: list[int] = []
    real_scan = filtered_search.CodeScan.search

    def counting(self, codes, k, selected):
        scans.append(len(selected))
        return real_scan(self, codes, k, selected)

    monkeypatch.setattr(filtered_search.CodeScan, "search", counting)
    with IndexStore.open(index_dir) as store:
        flat = store.manifest.binary_kind == "flat"
        for where in [*FILTERS, {"shelf": {"$ne": 1}}]:  # the last one: 4/5 of the items, above half
            scanned = store.search(queries, K, kind="binary", where=parse_filter(where))
            with monkeypatch.context() as selectors_only:
                selectors_only.setattr(segment_searcher.SegmentSearcher, "_scans", lambda self, size: False)
                through_selector = store.search(queries, K, kind="binary", where=parse_filter(where))
            np.testing.assert_array_equal(scanned.ids, through_selector.ids)  # ties too: the lower id first
            np.testing.assert_array_equal(scanned.scores, through_selector.scores)
    if flat:  # every filter of FILTERS once (20 queries in one call), and not the one above half
        assert scans == [len(_allowed(where)) for where in FILTERS]
    else:
        assert scans == []


@pytest.mark.parametrize("ids", ["ascending", "shuffled"])
def test_code_scan_finds_the_selected_ids_nearest_codes_in_any_id_order(ids: str) -> None:
    """``CodeScan`` maps ids to the rows of the index's own codes (rows in id order, or any order after an
    ID map was filled out of order) and ranks the selection as a brute-force Hamming scan does."""
    import faiss

    rng = np.random.default_rng(3)
    codes = rng.integers(0, 256, size=(300, 8), dtype=np.uint8)
    item_ids = np.arange(10, 310, dtype=np.int64) * 3
    if ids == "shuffled":
        item_ids = rng.permutation(item_ids)
    index = faiss.IndexBinaryIDMap2(faiss.IndexBinaryFlat(64))
    index.add_with_ids(codes, item_ids)
    scan = filtered_search.CodeScan.of(index)
    assert scan is not None and filtered_search.CodeScan.of(faiss.IndexBinaryIDMap2(faiss.IndexBinaryFlat(64))) is None
    selected = np.sort(rng.choice(item_ids, size=40, replace=False))
    query = rng.integers(0, 256, size=(3, 8), dtype=np.uint8)
    found = scan.search(query, 5, selected)
    rows = [int(np.flatnonzero(item_ids == i)[0]) for i in selected]
    distances = hamming_distances(query, codes[rows])
    order = np.argsort(distances, axis=1, kind="stable")[:, :5]  # ties: the lower id (selected is ascending)
    np.testing.assert_array_equal(found.ids, selected[order])
    np.testing.assert_allclose(found.scores, 1 - 2 * np.take_along_axis(distances, order, 1) / 64)


def test_a_filters_matches_are_remembered_until_the_next_update(index_dir: Path, tmp_path: Path) -> None:
    """A repeated filter reads its matches from SQLite once per generation of the store; an add or a
    remove makes a new generation, and filters that differ only by a value's JSON type stay apart."""
    copy = tmp_path / "index"
    shutil.copytree(index_dir, copy)
    red = parse_filter({"color": "red"})
    with IndexStore.open(copy) as store:
        reads: list[ItemFilter] = []
        real = store._db.matching_ids
        store._db.matching_ids = lambda where: reads.append(where) or real(where)  # type: ignore[method-assign]
        query = store.embeddings_of([4])  # item 4 (i = 3) is red
        assert store.search(query, 1, where=red).ids[0, 0] == 4
        assert store.search(query, 1, where=red).ids[0, 0] == 4 and len(reads) == 1
        store.remove([4])
        first = store.search(query, 1, where=red).ids[0, 0]
        assert first != 4 and first in _allowed({"color": "red"}) and len(reads) == 2
        (added,) = store.add([ImageRecord(Path("/photos/new.jpg"), "c99", metadata={"color": "red"})], query)
        assert store.search(query, 1, where=red).ids[0, 0] == added and len(reads) == 3
        assert len(store.search(query, K, where=parse_filter({"rare": True})).ids[0]) == 4
        assert len(store.search(query, K, where=parse_filter({"rare": 1})).ids[0]) == 0  # 1 is not true
        assert len(reads) == 5


def test_filtered_rerank_stays_inside_the_filter(index_dir: Path, vectors: np.ndarray) -> None:
    where = {"label": "c07", "color": "blue"}
    allowed = _allowed(where)
    with IndexStore.open(index_dir) as store:
        found = store.search(vectors[:5], 3, kind="binary", rerank=8, where=parse_filter(where))
        similarity = np.einsum("qd,qkd->qk", vectors[:5], vectors[found.ids - 1])
        np.testing.assert_allclose(found.scores, similarity, atol=1e-5)
        assert np.isin(found.ids, allowed).all() and (np.diff(found.scores, axis=1) <= 0).all()
        assert store.search(vectors[:2], K, where=ItemFilter.equal(label="no such label")).ids.shape == (2, 0)


def test_an_index_built_before_the_label_index_filters_the_same(index_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "old"
    shutil.copytree(index_dir, copy)
    with sqlite3.connect(copy / "items.sqlite") as db:
        db.execute("DROP INDEX items_label")
    with IndexStore.open(copy) as store:
        ids = store.search(store.embeddings_of([8]), 5, where=parse_filter('{"label": "c07"}')).ids
        assert ids[0, 0] == 8 and np.isin(ids, _allowed({"label": "c07"})).all()
        assert store.item(8).metadata == {"color": "green", "size": 3.0, "rare": False, "shelf": 2}


def test_metadata_and_filter_rules() -> None:
    assert parse_metadata('{"color": "red", "n": 3, "ok": true, "x": null}') == {
        "color": "red",
        "n": 3,
        "ok": True,
        "x": None,
    }
    bad = {
        "{not json": "not valid JSON",
        "[1, 2]": "must be a JSON object",
        '{"a": [1]}': "value of 'a' must be a string, number",
        '{"a": {"b": 1}}': "value of 'a' must be a string, number",
        '{"label": "x"}': "reserved",
        '{"a": NaN}': "value of 'a'",
        '{"": 1}': "keys must be non-empty",
        '{"a\\"b": 1}': "without double quotes",
        json.dumps({f"k{i}": i for i in range(33)}): "at most 32",
        json.dumps({"a": "x" * 5000}): "longer than 4096 bytes",
        json.dumps({"a": 2**64}): "value of 'a'",
    }
    for text, message in bad.items():
        with pytest.raises(DataError, match=message):
            parse_metadata(text)
    assert parse_filter(None) is None and parse_filter("{}") is None and parse_filter(" ") is None
    assert parse_filter({"label": "cat", "n": 1}) == ItemFilter.equal("cat", {"n": 1})
    with pytest.raises(DataError, match="'label' must be a string"):
        parse_filter('{"label": 3}')


def test_metadata_equality_keeps_json_types(tiny_model_dir: Path, tmp_path: Path) -> None:
    values = [1, 1.0, True, "1", None, 0, False]
    records = [ImageRecord(Path(f"/p/{i}.jpg"), "x", metadata={"v": v}) for i, v in enumerate(values)]
    records.append(ImageRecord(Path("/p/none.jpg"), "x", metadata={}))
    vectors = np.eye(len(records), DIM, dtype=np.float32)
    write_index(tmp_path / "index", OnnxEmbedder(tiny_model_dir, threads=1), records, vectors, _flat())
    with IndexStore.open(tmp_path / "index") as store:
        query = np.ones((1, DIM), np.float32)

        def matches(value: object) -> list[object]:
            ids = store.search(query, 20, where=ItemFilter.equal(metadata={"v": value})).ids[0]
            return sorted((store.item(int(i)).metadata["v"] for i in ids), key=repr)

        assert matches(1) == [1, 1.0] == matches(1.0)
        assert matches(True) == [True] and matches(False) == [False] and matches(0) == [0]
        assert matches("1") == ["1"] and matches(None) == [None]


def _flat():
    return float_kind("flat"), binary_kind("flat")


def test_index_add_metadata_option(fresh_index: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra" / "class_9"
    extra.mkdir(parents=True)
    for item in range(2):
        make_image(5, 20 + item).save(extra / f"x{item}.png")
    runner = CliRunner()
    added = runner.invoke(
        app, ["index", "add", str(fresh_index), "--data", str(extra.parent), "--metadata", '{"shop": "berlin"}']
    )
    assert added.exit_code == 0, added.output
    with IndexStore.open(fresh_index) as store:
        query = store.embeddings_of(store.ids()[:1])
        found = store.search(query, 5, where=parse_filter({"shop": "berlin"})).ids[0]
        assert sorted(store.item(int(i)).path.rsplit("/", 1)[1] for i in found) == ["x0.png", "x1.png"]
    refused = runner.invoke(app, ["index", "add", str(fresh_index), "--data", str(extra.parent), "--metadata", "[1]"])
    assert isinstance(refused.exception, DataError) and "--metadata must be a JSON object" in str(refused.exception)


def test_filtered_search_survives_faiss_torch_utils(index_dir: Path, vectors: np.ndarray) -> None:
    """pytorch-metric-learning imports ``faiss.contrib.torch_utils``, which replaces every index
    class's ``search`` with one that takes no ``params``; a training process (the Python API, a
    test session) must still filter."""
    import faiss.contrib.torch_utils  # noqa: F401  (the patch is process-wide, as in a training process)

    where = {"color": "red"}
    allowed = _allowed(where)
    with IndexStore.open(index_dir) as store:
        found = store.search(vectors[:5] + 0.05, K, where=parse_filter(where))
    assert found.ids.shape == (5, K)
    assert np.isin(found.ids, allowed).all()


def test_the_filter_language_parses_operators_and_refuses_hostile_filters() -> None:
    where = parse_filter('{"label": {"$in": ["a", "b"]}, "n": {"$gte": 1, "$lt": 5}, "tag": {"$exists": false}}')
    assert where is not None and where.keys() == ["n", "tag"]
    assert where.to_json() == {"label": {"$in": ["a", "b"]}, "n": {"$gte": 1, "$lt": 5}, "tag": {"$exists": False}}
    assert parse_filter({"color": "red"}) == ItemFilter.equal(metadata={"color": "red"})  # today's form
    bad = {
        '{"color": {"$regex": "r.*"}}': r"'\$regex' under 'color' is not an operator; known: \$eq",
        '{"color": ["red", "blue"]}': r'write \{"color": \{"\$in"',
        '{"color": {"$in": []}}': "non-empty array",
        '{"color": {"$in": "red"}}': "non-empty array",
        json.dumps({"color": {"$in": [None, True, 1.5, "x", 2**64]}}): r"\$in takes a string, number",
        '{"color": {"$eq": ["red"]}}': r"\$eq takes a string",
        '{"color": {"$ne": {"a": 1}}}': r"\$ne takes a string",
        '{"n": {"$gt": "5"}}': r"\$gt takes a number",
        '{"n": {"$lt": true}}': r"\$lt takes a number",
        '{"n": {"$exists": 1}}': "takes true or false",
        '{"n": {}}': "empty object",
        '{"n": {"a": 1}}': "metadata values are scalars",
        '{"label": {"$gt": "a"}}': "takes \\$eq, \\$ne, \\$in only",
        '{"label": {"$in": ["a", 3]}}': "must be a string",
        '{"label": {"$exists": true}}': "takes \\$eq, \\$ne, \\$in only",
        '{"n": {"$in": [[[1]]]}}': "nests 5 levels",
        json.dumps({"n": {"$in": list(range(101))}}): "at most 100",
        json.dumps({"n": {"$in": ["a\u0000"]}}): "NUL",
        '{"n": {"$in": ["\\ud800"]}}': "surrogate",
        '{"\\ud800": 1}': "surrogate",
        json.dumps({"n": {"$nope\ud800": 1}}, ensure_ascii=True): "not an operator",
    }
    for text, message in bad.items():
        with pytest.raises(DataError, match=message):
            parse_filter(text)
