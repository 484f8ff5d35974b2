"""The query/gallery protocol is applied the same way everywhere (docs/metrics.md, "Protocol").

Queries are the ``is_query`` items, the gallery the ``is_gallery`` items, and an item that is both
never retrieves itself and is not counted in its own R. The oracle is a brute-force loop over the
full similarity matrix; mixed flags (some items both, some only one) are the case that used to
let a query find itself.
"""

from __future__ import annotations

import numpy as np
import pytest
from reference_hamming import hamming_distances

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.evaluation import EvalData, as_built_metrics, exact_metrics, index_data
from retrieval.indexing.eval.metrics import RetrievalMetrics, evaluate_retrieval
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.store.files.index_store import IndexStore


def brute_force(similarity: np.ndarray, labels, is_query, is_gallery, ks) -> dict:
    """Per query: rank the gallery items other than itself by (-score, position); score by hand."""
    labels = np.asarray(labels)
    values: dict[str, list[float]] = {"map_at_r": [], "r_precision": [], "precision_at_1": []}
    values |= {f"r@{k}": [] for k in ks}
    for q in np.flatnonzero(is_query):
        candidates = np.array([g for g in np.flatnonzero(is_gallery) if g != q])
        order = candidates[np.lexsort((candidates, -similarity[q, candidates]))]
        relevant = labels[order] == labels[q]
        r = int(relevant.sum())
        if r == 0:
            continue
        precision = np.cumsum(relevant[:r]) / np.arange(1, r + 1)
        values["map_at_r"].append(float((precision * relevant[:r]).sum() / r))
        values["r_precision"].append(float(relevant[:r].mean()))
        values["precision_at_1"].append(float(relevant[0]))
        for k in ks:
            values[f"r@{k}"].append(float(relevant[:k].any()))
    return {name: float(np.mean(v)) for name, v in values.items()} | {"n": len(values["map_at_r"])}


def assert_equal_to(metrics: RetrievalMetrics, expected: dict, ks) -> None:
    assert metrics.num_queries == expected["n"]
    for name in ("map_at_r", "r_precision", "precision_at_1"):
        assert getattr(metrics, name) == pytest.approx(expected[name], abs=1e-9), name
    for k in ks:
        assert metrics.recall_at_k[k] == pytest.approx(expected[f"r@{k}"], abs=1e-9)


def mixed_flags(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """About half the items are both query and gallery, a quarter only query, a quarter only gallery."""
    kind = rng.integers(0, 4, n)
    return kind != 3, kind != 2  # 0, 1: both; 2: query only; 3: gallery only


def test_random_embeddings_cannot_retrieve_themselves_with_one_gallery_only_item() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((40, 16)).astype(np.float32)
    labels = np.repeat(np.arange(10), 4)
    is_query, is_gallery = np.ones(40, bool), np.ones(40, bool)
    is_query[0] = False  # one gallery-only item makes the set "query-gallery"
    metrics = evaluate_retrieval(vectors, labels, is_query, is_gallery, ks=(1,), compute_nmi=False)
    assert metrics.precision_at_1 < 0.5  # 1.0 when queries found themselves


@pytest.mark.parametrize("metric", ["ip", "hamming"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixed_flags_equal_the_brute_force_reference(metric: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 7, 90)
    vectors = (rng.integers(-2, 3, (7, 24))[labels] + rng.integers(-1, 2, (90, 24))).astype(np.float32)
    is_query, is_gallery = mixed_flags(90, rng)
    ks = (1, 2, 4, 8)
    if metric == "ip":
        values, similarity = vectors, vectors @ vectors.T
    else:
        values = binarize(vectors)
        similarity = -hamming_distances(values, values).astype(np.float64)
    metrics = evaluate_retrieval(values, labels, is_query, is_gallery, ks=ks, metric=metric, compute_nmi=False)
    assert_equal_to(metrics, brute_force(similarity, labels, is_query, is_gallery, ks), ks)


@pytest.mark.parametrize("kinds", [("flat", "flat"), ("hnsw", "ivf"), ("ivf", "hnsw")])
def test_as_built_index_metrics_follow_the_protocol_with_mixed_flags(
    kinds: tuple[str, str], tiny_model_dir, gallery_records: list[ImageRecord], tmp_path
) -> None:
    rng = np.random.default_rng(3)
    is_query, is_gallery = mixed_flags(len(gallery_records), rng)
    records = [
        ImageRecord(r.path, r.label, is_query=bool(q), is_gallery=bool(g))
        for r, q, g in zip(gallery_records, is_query, is_gallery, strict=True)
    ]
    build_index(tiny_model_dir, records, tmp_path / "index", float_kind=kinds[0], binary_kind=kinds[1], progress=False)
    with IndexStore.open(tmp_path / "index") as store:
        data = index_data(store)
        ks = (1, 2, 4)
        exact = exact_metrics(data, ks)
        reference = brute_force(data.embeddings @ data.embeddings.T, data.labels, data.is_query, data.is_gallery, ks)
        assert_equal_to(exact["float"], reference, ks)
        for kind in ("float", "binary"):  # 30 items: the approximate kinds search everything
            built = as_built_metrics(store, data, ks, kind)
            assert built.map_at_r == pytest.approx(exact[kind].map_at_r, abs=1e-6)
            assert built.recall_at_k == pytest.approx(exact[kind].recall_at_k, abs=1e-6)


def test_as_built_search_widens_until_k_gallery_hits_exist(tmp_path, tiny_model_dir, gallery_records) -> None:
    """Most items query-only: a shortlist sized by the gallery share would leave rows short of k hits."""
    records = [
        ImageRecord(r.path, r.label, is_query=True, is_gallery=(i % 6 == 0)) for i, r in enumerate(gallery_records)
    ]
    build_index(tiny_model_dir, records, tmp_path / "index", float_kind="hnsw", progress=False)
    with IndexStore.open(tmp_path / "index") as store:
        data = index_data(store)
        from retrieval.indexing.eval.evaluation import gallery_hits_widening

        k = int(data.is_gallery.sum())
        queries = np.flatnonzero(data.is_query)
        positions, valid = gallery_hits_widening(store, data, queries, k, "float")
        own_in_gallery = data.is_gallery[queries]
        assert (valid.sum(axis=1) == k - own_in_gallery).all()
        assert data.is_gallery[positions[valid]].all()
        assert not (positions == queries[:, None])[valid].any()


def test_exact_metrics_use_the_records_flags() -> None:
    rng = np.random.default_rng(5)
    labels = np.repeat(np.array(list("abcdef")), 5)
    vectors = rng.standard_normal((30, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    is_query, is_gallery = mixed_flags(30, rng)
    data = EvalData(vectors, labels, [f"{i}.png" for i in range(30)], is_query, is_gallery)
    ks = (1, 2)
    assert_equal_to(
        exact_metrics(data, ks)["float"], brute_force(vectors @ vectors.T, labels, is_query, is_gallery, ks), ks
    )
