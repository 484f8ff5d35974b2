"""The query/gallery protocol rule, exact and as built through an index, against a brute-force reference.

Rule (docs/metrics.md): queries are the ``is_query`` items, the gallery is the ``is_gallery``
items, an item that is both never retrieves itself, and queries with R = 0 are left out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from reference_hamming import hamming_distances

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.evaluation import (
    EvalData,
    as_built_metrics,
    evaluate_index,
    exact_metrics,
    exact_neighbors,
    index_data,
    index_neighbors,
)
from retrieval.indexing.eval.metrics import RetrievalMetrics, evaluate_embeddings
from retrieval.indexing.model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.builder import write_index
from retrieval.indexing.store.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.index_store import IndexStore

KS = (1, 2, 4)


def reference(similarity: np.ndarray, labels, is_query, is_gallery, ks) -> dict:
    """Loop over the queries: rank the gallery minus the query itself by (-score, position), score."""
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


def assert_matches(metrics: RetrievalMetrics, expected: dict, ks=KS) -> None:
    assert metrics.num_queries == expected["n"]
    assert metrics.map_at_r == pytest.approx(expected["map_at_r"], abs=1e-12)
    assert metrics.r_precision == pytest.approx(expected["r_precision"], abs=1e-12)
    assert metrics.precision_at_1 == pytest.approx(expected["precision_at_1"], abs=1e-12)
    assert metrics.recall_at_k == pytest.approx({k: expected[f"r@{k}"] for k in ks}, abs=1e-12)


def random_set(seed: int, n: int = 48, dim: int = 64, classes: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Clustered unit vectors (float16-exact, as an index stores them) and string labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    vectors = rng.standard_normal((classes, dim))[labels] + 1.5 * rng.standard_normal((n, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float16).astype(np.float32), np.array([f"c{label}" for label in labels])


def mixed_flags(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A third of the items are both query and gallery, a third query only, a third gallery only."""
    role = np.random.default_rng(seed + 100).integers(0, 3, n)
    return role != 2, role != 1


def similarities(vectors: np.ndarray, kind: str) -> np.ndarray:
    if kind == "float":
        return vectors.astype(np.float64) @ vectors.T.astype(np.float64)
    codes = binarize(vectors)
    return -hamming_distances(codes, codes).astype(np.float64)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind", ["float", "binary"])
def test_mixed_flags_equal_brute_force_with_self_exclusion(seed: int, kind: str) -> None:
    vectors, labels = random_set(seed)
    is_query, is_gallery = mixed_flags(seed, len(labels))
    data = vectors if kind == "float" else binarize(vectors)
    metric = "ip" if kind == "float" else "hamming"
    metrics = evaluate_embeddings(data, labels, is_query, is_gallery, ks=KS, metric=metric, compute_nmi=False)
    assert_matches(metrics, reference(similarities(vectors, kind), labels, is_query, is_gallery, KS))


def test_a_query_never_retrieves_itself_when_one_item_is_gallery_only() -> None:
    """Random embeddings: P@1 is near chance, not 1.0 (each query finding itself)."""
    vectors, labels = random_set(3, n=60, classes=3)
    vectors = np.random.default_rng(3).standard_normal(vectors.shape).astype(np.float32)
    is_query, is_gallery = np.ones(60, bool), np.ones(60, bool)
    is_query[0] = False
    metrics = evaluate_embeddings(vectors, labels, is_query, is_gallery, ks=(1,), compute_nmi=False)
    assert metrics.precision_at_1 < 0.7
    assert_matches(metrics, reference(similarities(vectors, "float"), labels, is_query, is_gallery, (1,)), (1,))


def test_without_flags_every_item_is_query_and_gallery() -> None:
    vectors, labels = random_set(4)
    both = np.ones(len(labels), bool)
    assert evaluate_embeddings(vectors, labels, ks=KS, compute_nmi=False) == evaluate_embeddings(
        vectors, labels, both, both, ks=KS, compute_nmi=False
    )


def write_test_index(
    root: Path, model_dir: Path, vectors: np.ndarray, labels, is_query, is_gallery, kinds: tuple[str, str]
) -> Path:
    """An index directory holding exactly these embeddings and flags (paths are never opened)."""
    records = [
        ImageRecord(root / "images" / f"{i}.png", str(label), is_query=bool(q), is_gallery=bool(g))
        for i, (label, q, g) in enumerate(zip(labels, is_query, is_gallery))
    ]
    out = root / f"index-{kinds[0]}-{kinds[1]}"
    write_index(out, OnnxEmbedder(model_dir), records, vectors, (float_kind(kinds[0]), binary_kind(kinds[1])))
    return out


@pytest.mark.parametrize("kinds", [("flat", "flat"), ("hnsw", "flat"), ("ivf", "ivf")])
def test_mixed_flags_through_an_index_equal_brute_force(
    kinds: tuple[str, str], tiny_model_dir: Path, tmp_path: Path
) -> None:
    vectors, labels = random_set(5)
    is_query, is_gallery = mixed_flags(5, len(labels))
    index_dir = write_test_index(tmp_path, tiny_model_dir, vectors, labels, is_query, is_gallery, kinds)
    with IndexStore.open(index_dir) as store:
        data = index_data(store)
        exact = exact_metrics(data, KS)
        report, _ = evaluate_index(store, ks=KS, progress=False)
        for kind in ("float", "binary"):
            expected = reference(similarities(vectors, kind), labels, is_query, is_gallery, KS)
            assert_matches(exact[kind], expected)
            assert_matches(report.metrics[kind], expected)
            if kind == "float" or kinds[1] == "flat":  # binary IVF ranks equal Hamming distances its own way
                assert_matches(as_built_metrics(store, data, KS, kind), expected)


def far_gallery_set() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """36 query-only items bunched together and 3 gallery items (one per class) far from all of them,
    so every query's 38 nearest items start with the 35 other queries."""
    rng = np.random.default_rng(0)
    dim = 64
    bunch = np.zeros(dim)
    bunch[:32] = 1.0
    queries = bunch + 0.05 * rng.standard_normal((36, dim))
    gallery = -np.repeat(bunch[None], 3, axis=0) + 0.3 * rng.standard_normal((3, dim))
    vectors = np.concatenate([queries, gallery])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    labels = np.array([f"c{i % 3}" for i in range(36)] + ["c0", "c1", "c2"])
    is_query = np.arange(39) < 36
    return vectors.astype(np.float16).astype(np.float32), labels, is_query, ~is_query


@pytest.mark.parametrize("kinds", [("hnsw", "hnsw"), ("ivf", "ivf")])
def test_as_built_query_gallery_search_returns_k_gallery_hits(
    kinds: tuple[str, str], tiny_model_dir: Path, tmp_path: Path
) -> None:
    vectors, labels, is_query, is_gallery = far_gallery_set()
    index_dir = write_test_index(tmp_path, tiny_model_dir, vectors, labels, is_query, is_gallery, kinds)
    with IndexStore.open(index_dir) as store:
        data = index_data(store)
        queries = np.flatnonzero(data.is_query)
        neighbours = index_neighbors(store, data, queries, 3)
        assert (neighbours >= 0).all() and data.is_gallery[neighbours].all()
        assert np.array_equal(np.sort(neighbours, axis=1), np.tile(np.flatnonzero(is_gallery), (36, 1)))
        expected = reference(similarities(vectors, "float"), labels, is_query, is_gallery, (1, 2))
        assert_matches(as_built_metrics(store, data, (1, 2), "float"), expected, (1, 2))
        binary = as_built_metrics(store, data, (3,), "binary")
        assert binary.recall_at_k[3] == 1.0  # all three gallery items were returned


def test_exact_grid_neighbours_follow_the_rule() -> None:
    vectors, labels = random_set(6)
    is_query, is_gallery = mixed_flags(6, len(labels))
    data = EvalData(vectors, labels, [str(i) for i in range(len(labels))], is_query, is_gallery)
    queries = np.flatnonzero(is_query)
    neighbours = exact_neighbors(data, queries, 4)
    similarity = similarities(vectors, "float")
    for q, row in zip(queries, neighbours):
        candidates = np.array([g for g in np.flatnonzero(is_gallery) if g != q])
        assert row.tolist() == candidates[np.lexsort((candidates, -similarity[q, candidates]))][:4].tolist()
