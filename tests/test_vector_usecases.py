"""Vectors in and out through the use-case layer (``usecases.vectors``): the checks every door shares (length,
finite values, normalisation, the model), an item added by its vector equal bit for bit to the item added by
its image, and searches by vector equal to a brute-force ranking of the stored vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from index_fixtures import make_image

from retrieval.indexing.common.errors import DataError, KeyConflictError, ModelMismatchError
from retrieval.indexing.query.query import Query
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.usecases import add_images, search
from retrieval.indexing.usecases.inputs import query_embedder
from retrieval.indexing.usecases.searching import search_store
from retrieval.indexing.usecases.vector_input import MODEL_PREFIX, checked_vectors
from retrieval.indexing.usecases.vectors import VectorAdd, add_vectors


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _binary_code(store: IndexStore, item_id: int) -> np.ndarray:
    """The code the binary faiss index of the item's segment holds for it."""
    (row,) = store._set.rows_of(np.asarray([item_id]))
    segment = store._set.segments[int(store._set.segment_of_rows(np.asarray([row]))[0])]
    return segment.binary_index.reconstruct(int(item_id))


def test_an_item_added_by_vector_equals_the_item_added_by_its_image_bit_for_bit(
    fresh_index: Path, tmp_path: Path
) -> None:
    image = tmp_path / "photos" / "photo" / "photo.png"  # an ImageFolder of one class
    image.parent.mkdir(parents=True)
    make_image(3, 77).save(image)
    vector = query_embedder(fresh_index).embed_paths([image], progress=False).embeddings[0]
    by_image = add_images(fresh_index, tmp_path / "photos", progress=False).ids[0]
    report = add_vectors(fresh_index, VectorAdd(vector.tolist(), "photo", keys=["v-1"]))
    assert report.normalised == 0 and report.count == 30 + 2
    (by_vector,) = report.ids
    with IndexStore.open(fresh_index) as store:
        assert np.array_equal(_binary_code(store, by_image), _binary_code(store, by_vector))
        assert np.array_equal(store.embedding(by_image), store.embedding(by_vector))
        wanted = np.packbits(store.embedding(by_image)[None] > store.manifest.binarization_threshold, 1, "little")
        assert np.array_equal(_binary_code(store, by_vector), wanted[0])  # the sign threshold, by hand
        item = store.item(by_vector)
        assert (item.key, item.label, Path(item.path).name) == ("v-1", "photo", "(vector)")


def test_vectors_are_checked_before_anything_is_written(fresh_index: Path) -> None:
    with IndexStore.open(fresh_index) as store:
        dim, sha = store.dim, store.manifest.model_sha256
    good = _unit(2, dim, seed=1)
    nan = good.copy()
    nan[1, 3] = np.nan
    cases = [
        (VectorAdd(good[:, :-1], "x"), DataError, f"must hold {dim} numbers"),
        (VectorAdd(nan, "x"), DataError, "vector 2 holds a value that is not a finite number"),
        (VectorAdd(np.zeros((1, dim)), "x"), DataError, "vector 1 is all zeros"),
        (VectorAdd([["a"] * dim], "x"), DataError, f"list of {dim} numbers"),
        (VectorAdd(good, ["a", "b", "c"]), DataError, "got 3 labels for 2 vectors"),
        (VectorAdd(good, "x", model="f" * 64), ModelMismatchError, f"index holds vectors of model {sha[:12]}"),
        (VectorAdd(good, "x", model=sha[:8]), ModelMismatchError, "at least 12 characters"),
        (VectorAdd(good, "x", keys=["same", "same"]), KeyConflictError, "more than one image"),
    ]
    for request, error, message in cases:
        with pytest.raises(error, match=message):
            add_vectors(fresh_index, request)
    with IndexStore.open(fresh_index) as store:
        assert store.count == 30
    assert add_vectors(fresh_index, VectorAdd(good, "x", model=sha[:MODEL_PREFIX].upper())).count == 32


def test_a_vector_off_the_unit_sphere_is_normalised_and_said() -> None:
    given = np.array([[3.0, 4.0], [0.6, 0.8]], np.float32)
    checked = checked_vectors(given, 2)
    assert checked.normalised == 1 and np.allclose(checked.vectors, [[0.6, 0.8], [0.6, 0.8]])
    assert checked.vectors[1].tobytes() == given[1].tobytes()  # a unit row is kept exactly


def test_a_search_by_vector_ranks_like_brute_force_and_an_upsert_keeps_the_id(fresh_index: Path) -> None:
    with IndexStore.open(fresh_index) as store:
        stored, ids = store.embeddings_of(store.ids()), store.ids()
        queries = _unit(3, store.dim, seed=2)
        found = search_store(store, [Query.vector(row) for row in queries * 2.0], SearchSettings(k=5))  # normalised
        assert "3 of the 3 vectors were not L2-normalised" in found.warnings[0]
        for query, page in zip(queries, found.queries, strict=True):
            wanted = ids[np.argsort(-(stored @ query), kind="stable")[:5]]
            assert [hit.item.id for hit in page.hits] == wanted.tolist()
    first = add_vectors(fresh_index, VectorAdd(queries[:1], "a", keys=["k"])).ids[0]
    report = add_vectors(fresh_index, VectorAdd(queries[1:2], "b", keys=["k"], replace=True))
    assert report.ids == [first] and report.replaced == 1 and report.count == 31
    (hits,) = search(fresh_index, vectors=queries[1], k=1)
    assert (hits[0].item.id, hits[0].item.label) == (first, "b") and hits[0].score == pytest.approx(1.0, abs=1e-2)
    with pytest.raises(KeyConflictError, match='the key "k" is already item'):
        add_vectors(fresh_index, VectorAdd(queries[:1], "a", keys=["k"]))


def test_the_flat_import_adds_and_searches_by_vectors(fresh_index: Path) -> None:
    import retrieval

    with IndexStore.open(fresh_index) as store:
        vectors = _unit(2, store.dim, seed=5)
    report = retrieval.add(fresh_index, vectors=vectors, keys=["p", "q"], metadata={"shop": "b"})
    hits = retrieval.search(fresh_index, vectors=vectors, k=1, where={"shop": "b"})
    assert [found[0].item.id for found in hits] == report.ids and [found[0].item.key for found in hits] == ["p", "q"]
    assert hits[0][0].item.label == "unlabelled"
