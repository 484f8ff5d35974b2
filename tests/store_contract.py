"""The contract of ``Store``, as tests every backend inherits (fsspec's ``tests/abstract`` style).

``StoreContract`` holds the tests; a backend's test class subclasses it with its fixtures, which
provide ``target(directory)``: where that backend writes a new index (test_store_contract.py). Every
test reads an index of the same ``COUNT`` random items (ids 1..COUNT, labels, metadata), built
through the backend's target, and compares with a brute-force answer computed here.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from retrieval.indexing.common.errors import DataError, ItemNotFoundError, KeyConflictError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.query.chain import filter_warnings, ranked_pages
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.results import PAD_ID, SearchResults
from retrieval.indexing.store.backends import IndexTarget, open_store
from retrieval.indexing.store.build.builder import index_kinds, write_index
from retrieval.indexing.store.shared.items.item_filter import parse_filter
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.store.shared.store_protocol import Store

DIM = 64  # the tiny model's dimension (index_fixtures.TINY_DIM)
COUNT = 60
LABELS = 5
K = 6


def make_metadata(i: int) -> dict[str, object]:
    """``tag`` on every third item only, as text or as a number."""
    tag = {"tag": "x" if i % 2 == 0 else 7} if i % 3 == 0 else {}
    return {"even": i % 2 == 0, "n": i, **tag}


def make_records(root: Path, count: int, seed: int) -> list[ImageRecord]:
    return [
        ImageRecord(path=root / f"s{seed}_{i}.png", label=f"label_{i % LABELS}", metadata=make_metadata(i))
        for i in range(count)
    ]


def _equal(stored: object, wanted: object) -> bool:
    """JSON equality: numbers by value, a boolean only with a boolean, null with null, text with text."""

    def kind(value: object) -> str:
        return "number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__

    return kind(stored) == kind(wanted) and stored == wanted


def _passes(fields: dict[str, object], key: str, op: str, value: object) -> bool:
    present, stored = key in fields, fields.get(key)
    number = isinstance(stored, int | float) and not isinstance(stored, bool)
    tests = {
        "$eq": lambda: present and _equal(stored, value),
        "$ne": lambda: not (present and _equal(stored, value)),
        "$in": lambda: present and any(_equal(stored, v) for v in value),  # type: ignore[attr-defined]
        "$gt": lambda: number and stored > value,  # type: ignore[operator]
        "$gte": lambda: number and stored >= value,  # type: ignore[operator]
        "$lt": lambda: number and stored < value,  # type: ignore[operator]
        "$lte": lambda: number and stored <= value,  # type: ignore[operator]
        "$exists": lambda: present == value,
    }
    return bool(tests[op]())


def brute_force_filter(where: dict[str, object]) -> np.ndarray:
    """Ids of the ``make_records`` items that pass ``where``, by the filter language's rules."""
    keep = []
    for i in range(COUNT):
        fields = {"label": f"label_{i % LABELS}", **make_metadata(i)}
        pairs = [
            (key, op, value)
            for key, given in where.items()
            for op, value in (given.items() if isinstance(given, dict) else [("$eq", given)])
        ]
        if all(_passes(fields, key, op, value) for key, op, value in pairs):
            keep.append(i + 1)
    return np.asarray(keep, dtype=np.int64)


FILTERS = [
    {"label": {"$in": ["label_1", "label_3"]}},
    {"label": {"$ne": "label_0"}},
    {"n": {"$gte": 10, "$lt": 20}},
    {"n": {"$gt": 50.5}},
    {"n": {"$lte": -1}},
    {"tag": {"$exists": True}},
    {"tag": {"$exists": False}},
    {"tag": {"$ne": "x"}},
    {"tag": {"$in": ["x", 7.0]}},
    {"tag": {"$gt": 5}},
    {"even": {"$ne": True}, "n": {"$in": [1, 3, 4, 5]}},
    {"missing": {"$exists": False}},
    {"label": "label_2", "n": {"$lt": 30}, "tag": 7},
]


def make_vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


VECTORS = make_vectors(COUNT, seed=0)


def brute_force(queries: np.ndarray, ids: np.ndarray, kind: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k ``ids`` (rows of ``VECTORS`` at ``ids - 1``) by inner product or by Hamming similarity."""
    gallery = VECTORS[ids - 1]
    if kind == "float":
        scores = queries @ gallery.T
    else:
        query_bits, bits = np.unpackbits(binarize(queries), axis=1), np.unpackbits(binarize(gallery), axis=1)
        distances = (query_bits[:, None, :] != bits[None, :, :]).sum(axis=2)
        scores = (1 - 2 * distances / DIM).astype(np.float32)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return ids[order], np.take_along_axis(scores, order, 1)


def assert_same_ranking(found: SearchResults, ids: np.ndarray, scores: np.ndarray, atol: float) -> None:
    """Scores equal; ids equal wherever a score is not tied (within ``atol``) with another of the row."""
    np.testing.assert_allclose(found.scores, scores, atol=atol, rtol=0)
    for row in range(len(ids)):
        for j, score in enumerate(scores[row]):
            tied = np.sum(np.abs(scores[row] - score) <= atol) > 1 or j == scores.shape[1] - 1
            assert tied or found.ids[row, j] == ids[row, j], (row, j)


class StoreContract:
    """What every ``Store`` does. A backend's fixtures class provides the classmethod
    ``target(directory) -> IndexTarget``: where that backend writes a new index."""

    target: Callable[[Path], IndexTarget]

    @classmethod
    def build(cls, directory: Path, model_dir: Path) -> Path:
        """An index of ``COUNT`` items (``make_records`` / ``VECTORS``) written through ``target``."""
        out = directory / "index"
        model = OnnxEmbedder(model_dir, threads=1)
        records = make_records(directory, COUNT, seed=0)
        write_index(out, model, records, VECTORS, index_kinds("flat", "flat"), target=cls.target(directory))
        return out

    @pytest.fixture(scope="class")
    @classmethod
    def store(cls, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
        """One index for the tests that only read."""
        with open_store(cls.build(tmp_path_factory.mktemp("contract"), tiny_model_dir)) as opened:
            yield opened

    @pytest.fixture
    def fresh(self, tiny_model_dir: Path, tmp_path: Path) -> Iterator[Store]:
        """An index of its own for a test that writes."""
        with open_store(self.build(tmp_path, tiny_model_dir)) as opened:
            yield opened

    # ----- reading -----------------------------------------------------------------------
    def test_is_a_store_of_every_item(self, store: Store) -> None:
        assert isinstance(store, Store)
        assert (store.count, store.dim, store.manifest.count) == (COUNT, DIM, COUNT)
        assert store.ids().tolist() == list(range(1, COUNT + 1))
        assert [item.id for item in store.all_items()] == list(range(1, COUNT + 1))

    def test_items_come_in_the_order_asked(self, store: Store) -> None:
        third, pad, first, unknown = store.items([3, PAD_ID, 1, 10**9])
        assert pad is None and unknown is None and first is not None and third is not None
        assert (third.id, third.label, third.metadata, first.id) == (3, "label_2", make_metadata(2), 1)
        assert store.item(3) == third
        with pytest.raises(ItemNotFoundError):
            store.item(10**9)

    def test_embeddings_are_the_stored_vectors(self, store: Store) -> None:
        ids = np.array([5, 1, 5, COUNT])
        np.testing.assert_allclose(store.embeddings_of(ids), VECTORS[ids - 1], atol=1e-3)  # float16 on files
        np.testing.assert_allclose(store.embedding(7), VECTORS[6], atol=1e-3)
        with pytest.raises(ItemNotFoundError):
            store.embeddings_of([10**9])

    def test_paths_in_use(self, store: Store) -> None:
        first = store.item(1).path
        assert store.paths_in_use([first, "/nowhere/x.png"]) == {first}

    def test_flat_kinds_are_exact(self, store: Store) -> None:
        assert store.is_exact(SearchKind.FLOAT) and store.is_exact(SearchKind.BINARY)

    # ----- searching ---------------------------------------------------------------------
    @pytest.mark.parametrize("kind", ["float", "binary"])
    def test_search_equals_brute_force(self, store: Store, kind: str) -> None:
        queries = make_vectors(8, seed=5)
        found = store.search(queries, K, kind=SearchKind(kind))
        ids, scores = brute_force(queries, store.ids(), kind, K)
        assert_same_ranking(found, ids, scores, atol=1e-5 if kind == "float" else 0)

    def test_rerank_orders_a_hamming_shortlist_by_inner_product(self, store: Store) -> None:
        queries = make_vectors(4, seed=6)
        found = store.search(queries, 5, kind="binary", rerank=20)
        _, shortlist_scores = brute_force(queries, store.ids(), "binary", 20)
        codes = np.unpackbits(binarize(VECTORS), axis=1)
        for row, query in enumerate(queries):
            np.testing.assert_allclose(found.scores[row], store.embeddings_of(found.ids[row]) @ query, atol=1e-6)
            assert (np.diff(found.scores[row]) <= 0).all()
            hamming = (codes[found.ids[row] - 1] != np.unpackbits(binarize(query[None]), axis=1)).sum(axis=1)
            assert (1 - 2 * hamming / DIM >= shortlist_scores[row, -1]).all()  # each from the top-20 shortlist

    def test_a_filter_keeps_its_matches_only(self, store: Store) -> None:
        where = parse_filter({"label": "label_1", "even": True})
        allowed = np.array([i + 1 for i in range(COUNT) if i % LABELS == 1 and i % 2 == 0])
        queries = make_vectors(5, seed=7)
        for kind in ("float", "binary"):
            found = store.search(queries, 3, kind=SearchKind(kind), where=where)
            assert (found.valid_mask().sum(axis=1) == min(3, len(allowed))).all()
            assert np.isin(found.ids[found.valid_mask()], allowed).all()
        found = store.search(queries, 3, where=where)
        ids, scores = brute_force(queries, allowed, "float", 3)
        assert_same_ranking(SearchResults(found.ids[:, :3], found.scores[:, :3]), ids, scores, atol=1e-5)

    @pytest.mark.parametrize("where", FILTERS, ids=repr)
    def test_filter_operators_select_what_brute_force_selects(self, store: Store, where: dict) -> None:
        allowed = brute_force_filter(where)
        queries = make_vectors(3, seed=12)
        for kind in ("float", "binary"):
            found = store.search(queries, COUNT, kind=SearchKind(kind), where=parse_filter(where))
            assert all(sorted(row[row != PAD_ID].tolist()) == allowed.tolist() for row in found.ids), kind
        if len(allowed):
            found = store.search(queries, 4, where=parse_filter(where))
            ids, scores = brute_force(queries, allowed, "float", 4)
            kept = ids.shape[1]  # Milvus pads past the matches
            assert_same_ranking(SearchResults(found.ids[:, :kept], found.scores[:, :kept]), ids, scores, atol=1e-5)

    @pytest.mark.parametrize("where", [None, {"n": {"$gte": 7}, "tag": {"$exists": True}}], ids=repr)
    def test_scroll_pages_every_match_once_by_ascending_id(self, store: Store, where: dict | None) -> None:
        allowed = brute_force_filter(where or {}).tolist()
        seen: list[int] = []
        after = 0
        while page := store.scroll(parse_filter(where), after, 7):
            assert len(page) <= 7 and all(item.id > after for item in page)
            seen += [item.id for item in page]
            after = page[-1].id
        assert seen == allowed
        assert [item.id for item in store.scroll(None, 58, 10)] == [59, 60]

    def test_value_counts_and_keys(self, store: Store) -> None:
        labels = store.value_counts(None)
        assert sorted(labels) == [(f"label_{i}", COUNT // LABELS) for i in range(LABELS)]
        assert store.value_counts("tag") == [("x", 10), (7, 10)]  # ties by JSON text
        assert store.value_counts("even") == [(False, 30), (True, 30)]
        assert store.value_counts("nowhere") == []
        assert store.metadata_keys() == ["even", "n", "tag"]
        assert store.keys_in_use(["tag", "colour", "n"]) == {"tag", "n"}
        assert filter_warnings(store, parse_filter({"tag": 7, "label": "label_1"})) == []
        (warning,) = filter_warnings(store, parse_filter({"colour": {"$ne": "red"}, "tag": 7}))
        assert warning == "no item has the metadata key 'colour'; the keys in use: even, n, tag"

    @pytest.mark.parametrize("kind", ["float", "binary"])
    def test_a_window_pages_and_thresholds_the_brute_force_ranking(self, store: Store, kind: str) -> None:
        queries = make_vectors(3, seed=13)
        ids, scores = brute_force(queries, store.ids(), kind, 20)
        pages = ranked_pages(store, queries, SearchSettings(k=5, kind=kind, offset=4))  # type: ignore[arg-type]
        for row, page in enumerate(pages):
            np.testing.assert_allclose([hit.score for hit in page.hits], scores[row, 4:9], atol=1e-5)
        threshold = float(np.median(scores[:, :10]))
        pages = ranked_pages(store, queries, SearchSettings(k=10, kind=kind, min_score=threshold))  # type: ignore[arg-type]
        for row, page in enumerate(pages):
            assert [round(hit.score, 4) for hit in page.hits] == [
                round(s, 4) for s in scores[row, :10] if s >= threshold
            ]
            assert page.below_min_score == int((scores[row, :10] < threshold).sum())
        (page,) = ranked_pages(store, queries[:1], SearchSettings(k=3, offset=COUNT - 2))
        assert len(page.hits) == 2 and page.below_min_score == 0
        for bad in ({"offset": -1}, {"min_score": 1.5}, {"min_score": float("nan")}):
            with pytest.raises(DataError, match="offset must be|min_score must be between -1 and 1"):
                SearchSettings(**bad)  # type: ignore[arg-type]

    def test_a_filter_nothing_matches_finds_nothing(self, store: Store) -> None:
        queries = make_vectors(2, seed=8)
        found = store.search(queries, 3, where=parse_filter({"label": "no such label"}))
        assert [store.hits(found, row) for row in range(len(queries))] == [[], []]

    def test_k_above_the_count_gives_every_item_once(self, store: Store) -> None:
        found = store.search(make_vectors(2, seed=9), COUNT + 10)
        assert found.k == COUNT and found.valid_mask().all()
        assert all(sorted(row) == list(range(1, COUNT + 1)) for row in found.ids.tolist())

    def test_bad_queries_are_data_errors(self, store: Store) -> None:
        with pytest.raises(DataError, match="embeddings"):
            store.search(np.zeros((1, DIM + 1), np.float32), 3)
        with pytest.raises(DataError, match="k must be at least 1"):
            store.search(make_vectors(1, seed=10), 0)
        with pytest.raises(DataError, match="unknown search kind"):
            store.search(make_vectors(1, seed=10), 3, kind="cosine")  # type: ignore[arg-type]

    def test_hits_drop_padding_the_excluded_item_and_gone_ids(self, store: Store) -> None:
        results = SearchResults(
            np.array([[4, 2, 10**9, 1, PAD_ID]], np.int64), np.array([[0.9, 0.5, 0.4, 0.3, -np.inf]], np.float32)
        )
        hits = store.hits(results, 0, exclude=2)
        assert [(item.id, round(score, 6)) for item, score in hits] == [(4, 0.9), (1, 0.3)]
        assert [item.id for item, _ in store.hits(results, 0, limit=1)] == [4]

    # ----- updating ----------------------------------------------------------------------
    def test_added_items_are_found_and_recalled(self, fresh: Store, tmp_path: Path) -> None:
        records, vectors = make_records(tmp_path / "new", 3, seed=1), make_vectors(3, seed=11)
        ids = fresh.add(records, vectors, idempotency_key="key")
        assert ids == [COUNT + 1, COUNT + 2, COUNT + 3] and fresh.count == COUNT + 3
        assert fresh.search(vectors, 1).ids[:, 0].tolist() == ids
        assert fresh.item(ids[0]).path == str(records[0].path)
        assert fresh.recall("key") == {"ids": ids, "count": COUNT + 3} and fresh.recall("other") is None
        assert fresh.add([], np.zeros((0, DIM), np.float32)) == []

    def test_an_add_refuses_blank_labels_and_wrong_shapes(self, fresh: Store, tmp_path: Path) -> None:
        records = make_records(tmp_path, 2, seed=2)
        with pytest.raises(DataError, match="the label is empty"):
            fresh.add([records[0], ImageRecord(path=tmp_path / "x.png", label=" ")], make_vectors(2, seed=12))
        with pytest.raises(DataError, match="embedding per record"):
            fresh.add(records, make_vectors(3, seed=12))
        assert fresh.count == COUNT

    def test_removed_items_are_gone_and_their_ids_never_return(self, fresh: Store, tmp_path: Path) -> None:
        assert fresh.remove([2, COUNT, 10**9]) == 2 and fresh.count == COUNT - 2
        assert fresh.items([2, COUNT]) == [None, None] and not np.isin([2, COUNT], fresh.ids()).any()
        found = fresh.search(VECTORS[[1, COUNT - 1]], 5)
        assert not np.isin(found.ids, [2, COUNT]).any()
        assert fresh.remove([2]) == 0
        assert fresh.add(make_records(tmp_path, 1, seed=3), make_vectors(1, seed=13)) == [COUNT + 1]

    # ----- item keys -----------------------------------------------------------------------
    def test_keyed_items_are_found_by_key_and_show_it(self, fresh: Store, tmp_path: Path) -> None:
        records = [replace(r, key=f"sku-{i}/ü") for i, r in enumerate(make_records(tmp_path, 3, seed=4))]
        vectors = make_vectors(3, seed=14)
        ids = fresh.add(records, vectors)
        assert fresh.ids_of_keys(["sku-1/ü", "nope", "sku-0/ü"]) == {"sku-0/ü": ids[0], "sku-1/ü": ids[1]}
        assert fresh.item_by_key("sku-2/ü").id == ids[2] and fresh.item(ids[2]).key == "sku-2/ü"
        assert fresh.item(1).key is None  # items without a key stay keyless, their ids valid
        (hit, *_), *_ = [fresh.hits(fresh.search(vectors[:1], 3))]
        assert (hit.item.id, hit.item.key) == (ids[0], "sku-0/ü")
        assert [item.key for item in fresh.scroll(None, COUNT, 10)] == ["sku-0/ü", "sku-1/ü", "sku-2/ü"]
        with pytest.raises(ItemNotFoundError, match="no item with the key 'nope'"):
            fresh.item_by_key("nope")

    def test_a_key_in_use_or_given_twice_is_a_conflict_and_writes_nothing(self, fresh: Store, tmp_path: Path) -> None:
        first = replace(make_records(tmp_path, 1, seed=5)[0], key="a")
        (first_id,) = fresh.add([first], make_vectors(1, seed=15))
        again = [replace(r, key=key) for r, key in zip(make_records(tmp_path, 2, seed=6), ["b", "a"], strict=True)]
        with pytest.raises(KeyConflictError, match=f'the key "a" is already item {first_id}'):
            fresh.add(again, make_vectors(2, seed=16))
        twice = [replace(r, key="c") for r in make_records(tmp_path, 2, seed=7)]
        with pytest.raises(KeyConflictError, match='the key "c" is given to more than one image'):
            fresh.add(twice, make_vectors(2, seed=17))
        assert fresh.count == COUNT + 1 and fresh.ids_of_keys(["a", "b", "c"]) == {"a": first_id}

    @pytest.mark.parametrize(
        ("key", "problem"),
        [
            ("", "is empty"),
            ("a\nb", "control character"),
            ("x" * 257, "at most 256"),
            ("a\0", "NUL"),
            (" ", "is blank"),
            ("\u200b", "is blank"),
            ("\u2800\u00a0", "is blank"),
            ("sku\ufeff", "U\\+FEFF"),
            ("a\u202eb", "U\\+202E"),
        ],
    )
    def test_bad_keys_are_data_errors(self, fresh: Store, tmp_path: Path, key: str, problem: str) -> None:
        record = replace(make_records(tmp_path, 1, seed=8)[0], key=key)
        with pytest.raises(DataError, match=problem):
            fresh.add([record], make_vectors(1, seed=18))
        assert fresh.count == COUNT

    def test_nfc_and_nfd_spellings_of_a_key_are_one_key(self, fresh: Store, tmp_path: Path) -> None:
        nfc, nfd = unicodedata.normalize("NFC", "café/Å"), unicodedata.normalize("NFD", "café/Å")
        assert nfc != nfd
        (item_id,) = fresh.add([replace(make_records(tmp_path, 1, seed=21)[0], key=nfd)], make_vectors(1, seed=21))
        assert fresh.item(item_id).key == nfc and fresh.ids_of_keys([nfd, nfc]) == {nfd: item_id, nfc: item_id}
        assert fresh.item_by_key(nfd).id == item_id
        with pytest.raises(KeyConflictError, match=f"is already item {item_id}"):
            fresh.add([replace(make_records(tmp_path, 1, seed=22)[0], key=nfc)], make_vectors(1, seed=22))
        both = [replace(r, key=key) for r, key in zip(make_records(tmp_path, 2, seed=23), ["x\u0307", "\u1e8b"])]
        with pytest.raises(KeyConflictError, match="given to more than one image"):
            fresh.add(both, make_vectors(2, seed=23))

    def test_a_replace_swaps_the_keyed_item_for_the_new_one(self, fresh: Store, tmp_path: Path) -> None:
        old_vector, new_vector = make_vectors(2, seed=19)
        old = ImageRecord(path=tmp_path / "old.png", label="label_0", metadata={"v": 1}, key="k")
        (old_id,) = fresh.add([old], old_vector[None])
        new = ImageRecord(path=tmp_path / "new.png", label="brand new", metadata={"v": 2}, key="k")
        (new_id,) = fresh.add([new], new_vector[None], replace=True)
        assert new_id == old_id and fresh.count == COUNT + 1  # an upsert keeps the id
        assert np.count_nonzero(fresh.ids() == old_id) == 1
        item = fresh.item_by_key("k")
        assert (item.id, item.label, item.metadata, item.path) == (old_id, "brand new", {"v": 2}, str(new.path))
        assert np.allclose(fresh.embedding(old_id), new_vector, atol=1e-2)
        for kind in ("float", "binary"):  # the old vector is gone: its own search scores the new one
            found = fresh.search(np.stack([old_vector, new_vector]), COUNT + 1, kind=kind)
            assert (found.ids == old_id).sum(axis=1).tolist() == [1, 1] and found.ids[1, 0] == old_id
        found = fresh.search(old_vector[None], COUNT + 1)
        assert np.isclose(found.scores[0][found.ids[0] == old_id][0], float(old_vector @ new_vector), atol=1e-2)
        assert [item.id for item in fresh.scroll(None, 0, COUNT + 5)].count(old_id) == 1
        assert ("brand new", 1) in fresh.value_counts(None)
        unkeyed = fresh.add([replace(new, key="fresh")], old_vector[None], replace=True)  # no item to replace
        assert fresh.count == COUNT + 2 and fresh.item_by_key("fresh").id == unkeyed[0]

    def test_a_build_keeps_the_records_keys(self, tiny_model_dir: Path, tmp_path: Path) -> None:
        records = [replace(r, key=f"b{i}" if i % 2 else None) for i, r in enumerate(make_records(tmp_path, 4, 9))]
        out = tmp_path / "keyed"
        model = OnnxEmbedder(tiny_model_dir, threads=1)
        vectors = make_vectors(4, seed=20)
        write_index(out, model, records, vectors, index_kinds("flat", "flat"), target=self.target(tmp_path))
        with open_store(out) as store:
            assert [item.key for item in store.all_items()] == [None, "b1", None, "b3"]
            assert store.ids_of_keys(["b1", "b3"]) == {"b1": 2, "b3": 4}
            with pytest.raises(KeyConflictError):
                store.add([replace(records[0], key="b3")], vectors[:1])
