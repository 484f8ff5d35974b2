"""Index directory: build/search round trips, updates, crash safety and every bad-input case."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import faiss
import numpy as np
import pytest
from index_fixtures import make_image
from reference_hamming import hamming_distances

from retrieval.indexing.common.errors import (
    ConfigError,
    DataError,
    IndexFormatError,
    IndexNotWritableError,
    ItemNotFoundError,
    KeyConflictError,
)
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.build.builder import build_index, write_index
from retrieval.indexing.store.files import files_target, store_updates
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.files.index_store import IndexStore


def live_in_faiss(store: IndexStore) -> tuple[int, int]:
    """Items in the float and the binary faiss indexes of all segments, less the tombstones."""
    segments = store._set.segments
    float_total = sum(segment.float_index.ntotal for segment in segments)
    binary_total = sum(segment.binary_index.ntotal for segment in segments)
    return float_total - store.tombstone_count, binary_total - store.tombstone_count


@pytest.fixture(scope="module")
def embedder(tiny_model_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder(tiny_model_dir, threads=1)


@pytest.fixture(scope="module")
def built(tiny_model_dir: Path, gallery_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = [ImageRecord(path=p, label=p.parent.name) for p in sorted(gallery_dir.glob("*/*.png"))]
    out = tmp_path_factory.mktemp("built") / "index"
    report = build_index(tiny_model_dir, records, out, progress=False)
    assert report.count == 30 and report.num_labels == 6 and report.failures == []
    return out


@pytest.fixture()
def index_copy(built: Path, tmp_path: Path) -> Path:
    shutil.copytree(built, tmp_path / "index")
    return tmp_path / "index"


def test_float_search_matches_brute_force_and_finds_itself(built: Path) -> None:
    with IndexStore.open(built) as store:
        ids = store.ids()
        vectors = store.embeddings_of(ids)
        results = store.search(vectors, 5)
        assert (results.ids[:, 0] == ids).all()
        expected = np.sort(vectors @ vectors.T, axis=1)[:, ::-1][:, :5]
        np.testing.assert_allclose(results.scores, expected, atol=2e-3)  # faiss holds float32, the file float16
        assert [item.label for item in store.items(results.ids[:, 1])] == [item.label for item in store.items(ids)]
        assert store.manifest.count == 30 and (built / "model" / "model.onnx").is_file()


def test_binary_search_scores_are_hamming_similarities(built: Path) -> None:
    with IndexStore.open(built) as store:
        ids = store.ids()
        vectors = store.embeddings_of(ids)
        results = store.search(vectors, 4, kind="binary")
        codes = binarize(vectors)
        distances = hamming_distances(codes, codes)
        expected = 1 - 2 * np.sort(distances, axis=1)[:, :4] / store.manifest.bits
        np.testing.assert_allclose(results.scores, expected, atol=1e-6)
        for q, row in enumerate(results.ids):  # itself is among the distance-0 ties at rank 1
            position = {int(i): n for n, i in enumerate(ids)}
            assert distances[q, position[int(row[0])]] == 0 and distances[q, q] == 0


def test_rerank_orders_the_binary_shortlist_by_exact_float_score(built: Path) -> None:
    with IndexStore.open(built) as store:
        queries = store.embeddings_of(store.ids()[:7])
        shortlist = store.search(queries, 12, kind="binary").ids
        reranked = store.search(queries, 5, kind="binary", rerank=12)
        for q in range(len(queries)):
            exact = store.embeddings_of(shortlist[q]) @ queries[q]
            order = np.argsort(-exact, kind="stable")[:5]
            np.testing.assert_array_equal(reranked.ids[q], shortlist[q][order])
            np.testing.assert_allclose(reranked.scores[q], exact[order], atol=1e-6)
        assert (reranked.ids[:, 0] == store.ids()[:7]).all()


@pytest.mark.parametrize("kinds", [("flat", "flat"), ("hnsw", "hnsw"), ("ivf", "ivf"), ("ivfpq", "flat")])
def test_add_and_remove_keep_ids_stable_and_files_consistent(
    kinds: tuple[str, str], embedder: OnnxEmbedder, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    result = embedder.embed_paths([r.path for r in gallery_records], progress=False)
    out = tmp_path / "index"
    write_index(out, embedder, gallery_records, result.embeddings, (float_kind(kinds[0]), binary_kind(kinds[1])))
    with IndexStore.open(out) as store:
        before = {item.id: item.path for item in store.all_items()}
        removed = [max(before), min(before), 7]
        assert store.remove(removed + [999]) == 3
        new_images = [make_image(c, 9) for c in (0, 3)]
        paths = [tmp_path / f"new_{c}.png" for c in (0, 3)]
        for image, path in zip(new_images, paths):
            image.save(path)
        new_ids = store.add(
            [ImageRecord(path=p, label=f"class_{c}") for p, c in zip(paths, (0, 3))], embedder.embed_images(new_images)
        )
        assert min(new_ids) > max(before)  # ids are never reused, even the removed maximum
    with IndexStore.open(out) as store:
        assert store.count == 29 == store.manifest.count
        assert live_in_faiss(store) == (29, 29)  # every segment's indexes, less their tombstones
        after = {item.id: item.path for item in store.all_items()}
        assert {i: before[i] for i in before if i not in removed} == {i: after[i] for i in before if i not in removed}
        everything = store.embeddings_of(store.ids())
        for kind in ("float", "binary"):
            found = store.search(everything, 29, kind=kind).ids
            assert not np.isin(found, removed).any() and np.isin(new_ids, found).all()
        if kinds[0] != "ivfpq":  # 30 items only afford a 1-bit product quantizer: not self-retrieving
            assert store.search(store.embeddings_of(new_ids), 1).ids[:, 0].tolist() == new_ids
        with pytest.raises(DataError, match="no item 7"):
            store.item(7)


def test_interrupted_update_is_repaired_on_open(
    index_copy: Path, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def crash(*args: object) -> None:
        raise OSError("disk full")

    image_path = tmp_path / "late.png"
    make_image(4, 8).save(image_path)
    with IndexStore.open(index_copy) as store:
        monkeypatch.setattr(store_updates, "write_faiss_files", crash)  # the add's delta
        with pytest.raises(IndexNotWritableError, match="disk full"):
            store.add([ImageRecord(path=image_path, label="class_4")], embedder.embed_images([make_image(4, 8)]))
    monkeypatch.undo()
    assert json.loads((index_copy / "manifest.json").read_text())["generation"] == 0  # faiss + manifest stale
    with IndexStore.open(index_copy) as store:  # SQLite committed generation 1: rebuild faiss from it
        assert store.count == 31 and live_in_faiss(store) == (31, 31)
        assert store.manifest.generation == 1
        (new_id,) = [item.id for item in store.all_items() if item.path == str(image_path)]
        assert store.search(store.embedding(new_id)[None], 1).ids[0, 0] == new_id
    (delta,) = (index_copy / "segments").iterdir()  # the add's delta segment: its faiss files were repaired
    saved = [faiss.read_index(str(folder / "float.faiss")).ntotal for folder in (index_copy, delta)]
    assert saved == [30, 1]  # the repair was saved


def test_crash_mid_build_leaves_previous_index_loadable(
    built: Path,
    index_copy: Path,
    tiny_model_dir: Path,
    gallery_records: list[ImageRecord],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def half_written(index_dir: Path, float_index: object, binary_index: object) -> None:
        faiss.write_index(float_index, str(index_dir / "float.faiss"))
        raise OSError("killed")

    before = sorted(p.name for p in index_copy.iterdir())
    monkeypatch.setattr(files_target, "write_faiss_files", half_written)
    with pytest.raises(OSError, match="killed"):
        build_index(tiny_model_dir, gallery_records[:10], index_copy, progress=False)
    assert sorted(p.name for p in index_copy.iterdir()) == before
    assert [p.name for p in index_copy.parent.iterdir()] == ["index"]  # no staging directory left
    with IndexStore.open(index_copy) as store:
        assert store.count == 30


def test_bad_inputs_give_one_sentence_and_damage_nothing(
    built: Path, index_copy: Path, tiny_model_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    with pytest.raises(DataError, match="gallery is empty"):
        build_index(tiny_model_dir, [], tmp_path / "empty", progress=False)
    with pytest.raises(ConfigError, match="unknown float index kind 'annoy'; known kinds: flat, hnsw, ivf, ivfpq"):
        build_index(tiny_model_dir, gallery_records, tmp_path / "x", float_kind="annoy", progress=False)
    with pytest.raises(ConfigError, match="unknown binary index kind 'pq'; known kinds: flat, ivf, hnsw"):
        build_index(tiny_model_dir, gallery_records, tmp_path / "x", binary_kind="pq", progress=False)
    blank = [ImageRecord(path=gallery_records[0].path, label=" ")]
    with pytest.raises(DataError, match="the label is empty"):
        build_index(tiny_model_dir, blank, tmp_path / "x", progress=False)
    unreadable = [ImageRecord(path=tmp_path / "gone.png", label="a")]
    with pytest.raises(DataError, match="none of the 1 images could be read"):
        build_index(tiny_model_dir, unreadable, tmp_path / "x", progress=False)
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "holiday.jpg").write_bytes(b"precious")
    with pytest.raises(ConfigError, match="is not an index directory"):
        build_index(tiny_model_dir, gallery_records, photos, progress=False)
    assert (photos / "holiday.jpg").read_bytes() == b"precious"
    assert not (tmp_path / "x").exists() and not (tmp_path / "empty").exists()
    with IndexStore.open(built) as store:
        with pytest.raises(DataError, match=r"shape \(2, 8\) but the index holds 64-d"):
            store.search(np.ones((2, 8), np.float32), 3)
        with pytest.raises(DataError, match="k must be at least 1"):
            store.search(store.embeddings_of(store.ids()[:1]), 0)
        with pytest.raises(DataError, match="needs one 64-d embedding per record"):
            store.add(gallery_records[:2], np.ones((1, 64), np.float32))
    with pytest.raises(
        IndexFormatError,
        match="index was built with model .* but the query model is 0123456789ab; rebuild the index or pass --force",
    ):
        IndexStore.open(built, expected_model_sha256="0123456789abcdef")
    IndexStore.open(built, expected_model_sha256="0123456789abcdef", force=True).close()


@pytest.mark.parametrize(
    "damaged", ["float.faiss", "binary.faiss", "manifest.json", "items.sqlite", "embeddings.f16.npy"]
)
def test_corrupt_or_truncated_files_are_named(damaged: str, index_copy: Path) -> None:
    path = index_copy / damaged
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3])
    with pytest.raises(IndexFormatError, match=f"{damaged} is (corrupt|missing|not).*rebuild"):
        IndexStore.open(index_copy)
    path.unlink()
    with pytest.raises(IndexFormatError, match=f"{damaged}.*(missing|rebuild)"):
        IndexStore.open(index_copy)


def test_emptied_index_refuses_search_and_accepts_adds(index_copy: Path, embedder: OnnxEmbedder) -> None:
    with IndexStore.open(index_copy) as store:
        query = store.embeddings_of(store.ids()[:1])
        assert store.remove(store.ids().tolist()) == 30 and store.count == 0
        with pytest.raises(DataError, match="is empty; add images"):
            store.search(query, 3)
    with IndexStore.open(index_copy) as store:
        assert store.count == 0
        (new_id,) = store.add([ImageRecord(path=Path("a.png"), label="class_0")], query)
        assert new_id == 31 and store.search(query, 3).ids.tolist() == [[31]]


def test_unreadable_gallery_images_are_reported_and_skipped(
    tiny_model_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    records = gallery_records[:3] + [ImageRecord(path=corrupt, label="class_0")] + gallery_records[3:5]
    report = build_index(tiny_model_dir, records, tmp_path / "index", progress=False)
    assert report.count == 5 and [path for path, _ in report.failures] == [corrupt]
    with IndexStore.open(tmp_path / "index") as store:
        assert [item.path for item in store.all_items()] == [str(r.path) for r in records if r.path != corrupt]


def test_hits_are_a_result_row_as_items_without_padding_excluded_or_removed_ids(index_copy: Path) -> None:
    from retrieval.indexing.search.results import PAD_ID, SearchResults

    with IndexStore.open(index_copy) as store:
        a, b, c, gone = store.ids()[:4].tolist()
        store.remove([gone])
        row = SearchResults(
            ids=np.array([[c, a, PAD_ID, b], [a, gone, b, c]], dtype=np.int64),
            scores=np.array([[0.1, 0.2, -np.inf, 0.3], [0.9, 0.8, 0.7, 0.6]], dtype=np.float32),
        )
        got = [(item.id, item.path, score) for item, score in store.hits(row, 1, exclude=a)]
        expected = [(i, store.item(i).path, s) for i, s in ((b, 0.7), (c, 0.6))]
        assert [(i, p) for i, p, _ in got] == [(i, p) for i, p, _ in expected]
        np.testing.assert_allclose([s for *_, s in got], [s for *_, s in expected], rtol=1e-6)
        assert [item.id for item, _ in store.hits(row, limit=3)] == [c, a, b]  # row 0: the padding is no hit


def test_ivf_training_uses_a_bounded_sample_and_still_finds_the_neighbours(monkeypatch: pytest.MonkeyPatch) -> None:
    """k-means trains on at most 64 rows per list (faiss would convert every row to float32 first)."""
    from retrieval.indexing.store.files import faiss_kinds

    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(1000, 8), dtype=np.uint8)
    sample = faiss_kinds.training_sample(data, 4)
    assert len(sample) == 4 * faiss_kinds.TRAINING_POINTS_PER_LIST and len(np.unique(sample, axis=0)) == len(sample)
    assert faiss_kinds.training_sample(data, 4).tobytes() == sample.tobytes()  # the same sample every time
    small = data[:200]
    assert faiss_kinds.training_sample(small, 4) is small and faiss_kinds.training_sample(data, 0) is data
    trained_on: list[int] = []
    monkeypatch.setattr(faiss_kinds, "TRAINING_POINTS_PER_LIST", 39)  # so that 6000 codes get sampled
    monkeypatch.setattr(faiss.IndexBinaryIVF, "train", _spy(faiss.IndexBinaryIVF.train, trained_on))
    codes = rng.integers(0, 256, size=(6000, 8), dtype=np.uint8)
    index = faiss_kinds.build_binary_index(faiss_kinds.binary_kind("ivf"), codes, np.arange(6000), 64)
    ivf = faiss.downcast_IndexBinary(index.index)
    assert trained_on == [39 * ivf.nlist] and 39 * ivf.nlist < 6000
    ivf.nprobe = ivf.nlist  # every list: exact, so each code finds itself
    distances, ids = index.search(codes[:50], 1)
    assert (distances[:, 0] == 0).all() and (ids[:, 0] == np.arange(50)).all()


def _spy(train, calls: list[int]):
    def spied(self, data):
        calls.append(len(data))
        return train(self, data)

    return spied


def test_an_index_built_before_item_keys_opens_searches_and_takes_keys(index_copy: Path, gallery_dir: Path) -> None:
    table = sqlite3.connect(index_copy / "items.sqlite")  # the item table as written before keys existed
    table.executescript("DROP INDEX items_key; ALTER TABLE items DROP COLUMN key;")
    table.close()
    with IndexStore.open(index_copy) as store:
        ids = store.ids()
        vectors = store.embeddings_of(ids)
        assert (store.search(vectors, 1).ids[:, 0] == ids).all()
        assert {item.key for item in store.all_items()} == {None} and store.ids_of_keys(["a"]) == {}
        with pytest.raises(ItemNotFoundError, match="no item with the key 'a'"):
            store.item_by_key("a")
        image = next(gallery_dir.glob("*/*.png"))
        (plain,) = store.add([ImageRecord(path=image, label="old")], vectors[:1])  # still no key column
        (keyed,) = store.add([ImageRecord(path=image, label="new", key="a")], vectors[1:2])
        assert store.item_by_key("a").id == keyed and store.item(plain).key is None
    with IndexStore.open(index_copy) as store:
        assert store.item_by_key("a").id == keyed and store.count == len(ids) + 2
        with pytest.raises(KeyConflictError):
            store.add([ImageRecord(path=image, label="new", key="a")], vectors[1:2])


def test_a_replace_interrupted_before_or_after_its_commit_leaves_one_item_under_the_key(
    index_copy: Path, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from retrieval.indexing.store.shared.items.items_db import ItemsDb

    def crash(*args: object) -> None:
        raise OSError("disk full")

    paths = [tmp_path / f"v{i}.png" for i in range(3)]
    for i, path in enumerate(paths):
        make_image(4, 20 + i).save(path)
    vectors = embedder.embed_paths(paths, progress=False).embeddings
    with IndexStore.open(index_copy) as store:
        (old,) = store.add([ImageRecord(path=paths[0], label="old", key="k")], vectors[:1])
        monkeypatch.setattr(ItemsDb, "insert", crash)  # inside the transaction: the delete rolls back too
        with pytest.raises(IndexNotWritableError, match="disk full"):
            store.add([ImageRecord(path=paths[1], label="new", key="k")], vectors[1:2], replace=True)
    monkeypatch.undo()
    with IndexStore.open(index_copy) as store:  # before the commit: the old item, searchable
        assert store.item_by_key("k").id == old and store.count == 31 and live_in_faiss(store) == (31, 31)
        assert store.search(vectors[:1], 1).ids[0, 0] == old
        monkeypatch.setattr(store_updates, "write_faiss_files", crash)  # after the commit
        with pytest.raises(IndexNotWritableError, match="disk full"):
            store.add([ImageRecord(path=paths[2], label="new", key="k")], vectors[2:], replace=True)
    monkeypatch.undo()
    with IndexStore.open(index_copy) as store:  # after the commit: the new item only, repaired on open
        new = store.item_by_key("k")
        assert new.id == old and new.label == "new" and new.path == str(paths[2])  # the id survives
        assert store.count == 31 and live_in_faiss(store) == (31, 31) and store.manifest.num_labels == 7
        found = store.search(vectors, 31).ids
        assert (found == old).sum() == 3 and store.search(vectors[2:], 1).ids[0, 0] == old
        assert np.allclose(store.embedding(old), vectors[2], atol=1e-2)  # the new vector, not the old one
