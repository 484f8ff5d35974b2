"""Retrieval metrics against a brute-force reference, the MAP@R paper and pytorch-metric-learning."""

from __future__ import annotations

import numpy as np
import pytest
from reference_hamming import hamming_distances
from sklearn.metrics import normalized_mutual_info_score

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.eval.metrics import (
    RetrievalMetrics,
    default_recall_ks,
    evaluate_embeddings,
    metrics_from_neighbor_labels,
)
from retrieval.indexing.eval.nmi import (
    kmeans_assignments,
    nmi_kmeans,
    normalized_mutual_info,
    normalized_mutual_info_rows,
)
from retrieval.indexing.search.binary import binarize, codes_to_signs


def brute_force_metrics(similarity: np.ndarray, query_labels, gallery_labels, ks, same_set: bool) -> dict:
    """Per-query loops over the full similarity matrix, ranked by (-score, gallery index)."""
    similarity = similarity.astype(np.float64).copy()
    if same_set:
        np.fill_diagonal(similarity, -np.inf)
    gallery_labels = np.asarray(gallery_labels)
    values = {"map_at_r": [], "r_precision": [], "precision_at_1": [], **{f"r@{k}": [] for k in ks}}
    for row, label in zip(similarity, query_labels):
        order = np.lexsort((np.arange(len(row)), -row))
        if same_set:
            order = order[:-1]  # the query itself, ranked last at -inf
        relevant = gallery_labels[order] == label
        r = int(relevant.sum())
        if r == 0:
            continue
        precision = np.cumsum(relevant[:r]) / np.arange(1, r + 1)
        values["map_at_r"].append(float((precision * relevant[:r]).sum() / r))
        values["r_precision"].append(relevant[:r].sum() / r)
        values["precision_at_1"].append(float(relevant[0]))
        for k in ks:
            values[f"r@{k}"].append(float(relevant[:k].any()))
    return {name: float(np.mean(v)) for name, v in values.items()} | {"n": len(values["map_at_r"])}


def assert_matches(metrics: RetrievalMetrics, expected: dict, ks) -> None:
    assert metrics.num_queries == expected["n"]
    assert metrics.map_at_r == pytest.approx(expected["map_at_r"], abs=1e-12)
    assert metrics.r_precision == pytest.approx(expected["r_precision"], abs=1e-12)
    assert metrics.precision_at_1 == pytest.approx(expected["precision_at_1"], abs=1e-12)
    for k in ks:
        assert metrics.recall_at_k[k] == pytest.approx(expected[f"r@{k}"], abs=1e-12)


def integer_embeddings(rng, n: int, dim: int, n_classes: int):
    """Small integer vectors: every inner product is exact in float32, and ties are frequent."""
    labels = rng.integers(0, n_classes, n)
    centres = rng.integers(-2, 3, (n_classes, dim))
    vectors = centres[labels] + rng.integers(-1, 2, (n, dim))
    vectors[: n // 10] = vectors[n // 10 : 2 * (n // 10)]  # exact duplicates
    return vectors.astype(np.float32), labels


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_same_set_matches_brute_force_with_ties_and_singletons(seed):
    rng = np.random.default_rng(seed)
    vectors, labels = integer_embeddings(rng, 300, 6, 40)
    labels[-3:] = [1000, 1001, 1002]  # singleton classes: R = 0, excluded
    ks = (1, 2, 3, 16)  # K < R for the bigger classes
    metrics = evaluate_embeddings(vectors, labels, ks=ks, compute_nmi=False)
    assert_matches(metrics, brute_force_metrics(vectors @ vectors.T, labels, labels, ks, True), ks)
    assert metrics.num_queries == int((np.bincount(labels)[labels] > 1).sum())


@pytest.mark.parametrize("seed", [0, 1])
def test_same_set_streaming_path_equals_brute_force(seed, monkeypatch):
    """Force the chunked path (used when N x k results would not fit in memory)."""
    import retrieval.indexing.eval.metrics as module

    monkeypatch.setattr(module, "_SAME_SET_HEAP_BYTES", 0)
    monkeypatch.setattr(module, "_SCORE_ELEMENTS", 64)
    rng = np.random.default_rng(seed)
    vectors, labels = integer_embeddings(rng, 250, 5, 12)
    metrics = evaluate_embeddings(vectors, labels, ks=(1, 4), compute_nmi=False)
    assert_matches(metrics, brute_force_metrics(vectors @ vectors.T, labels, labels, (1, 4), True), (1, 4))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_separate_sets_with_string_labels(seed):
    rng = np.random.default_rng(seed)
    vectors, labels = integer_embeddings(rng, 400, 6, 30)
    names = np.array([f"class-{label}" for label in labels])
    queries, gallery = vectors[:120], vectors[120:]
    names[:2] = ["only-in-queries", "only-in-queries"]  # no gallery item: R = 0
    ks = (1, 5, 10)
    metrics = evaluate_embeddings(queries, names[:120], gallery, names[120:], ks=ks, compute_nmi=False)
    expected = brute_force_metrics(queries @ gallery.T, names[:120], names[120:], ks, False)
    assert_matches(metrics, expected, ks)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hamming_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 15, 260)
    embeddings = rng.standard_normal((15, 20))[labels] + rng.standard_normal((260, 20))
    codes = binarize(embeddings)  # 20 bits: ties everywhere
    similarity = -hamming_distances(codes, codes).astype(np.float64)
    metrics = evaluate_embeddings(codes, labels, ks=(1, 8), metric="hamming", compute_nmi=False)
    assert_matches(metrics, brute_force_metrics(similarity, labels, labels, (1, 8), True), (1, 8))
    separate = evaluate_embeddings(
        codes[:60], labels[:60], codes[60:], labels[60:], ks=(2,), metric="hamming", compute_nmi=False
    )
    expected = brute_force_metrics(-hamming_distances(codes[:60], codes[60:]), labels[:60], labels[60:], (2,), False)
    assert_matches(separate, expected, (2,))


@pytest.mark.parametrize(
    ("hit_ranks", "r_precision", "map_at_r"),
    [([1], 0.10, 0.10), ([1, 10], 0.20, 0.12), ([1, 2], 0.20, 0.20), (list(range(1, 11)), 1.0, 1.0)],
)
def test_map_at_r_paper_table_3(hit_ranks, r_precision, map_at_r):
    """Musgrave et al. 2020, Table 3: R = 10, Recall@1 is 100 in all four rows."""
    neighbours = np.full((1, 10), 99)
    neighbours[0, np.array(hit_ranks) - 1] = 7
    metrics = metrics_from_neighbor_labels(neighbours, np.array([7]), np.array([10]), ks=(1,))
    assert metrics.recall_at_k[1] == metrics.precision_at_1 == 1.0
    assert metrics.r_precision == pytest.approx(r_precision)
    assert metrics.map_at_r == pytest.approx(map_at_r)


def test_neighbor_labels_padding_and_missing_columns_count_as_misses():
    neighbours = np.array([[3, -1, -1], [5, 5, 4]])
    metrics = metrics_from_neighbor_labels(neighbours, np.array([3, 5]), np.array([4, 2]), ks=(1, 2, 50))
    # query 0: R=4, one hit at rank 1, columns 4.. are missing -> AP = 1/4, RP = 1/4
    # query 1: R=2, hits at 1 and 2 -> AP = 1, RP = 1
    assert metrics.map_at_r == pytest.approx((0.25 + 1.0) / 2)
    assert metrics.r_precision == pytest.approx((0.25 + 1.0) / 2)
    assert metrics.recall_at_k == {1: 1.0, 2: 1.0, 50: 1.0}


def test_neighbor_labels_skips_rows_without_relevant_items():
    neighbours = np.array([[1, 2], [2, 2]])
    metrics = metrics_from_neighbor_labels(neighbours, np.array([1, 9]), np.array([1, 0]), ks=(1,))
    assert metrics.num_queries == 1 and metrics.map_at_r == 1.0


def clustered(rng, n_classes: int, per_class: int, dim: int, noise: float = 0.8):
    labels = np.repeat(np.arange(n_classes), per_class)
    vectors = rng.standard_normal((n_classes, dim))[labels] + noise * rng.standard_normal((len(labels), dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32), labels


def pml_metrics(*args):
    accuracy = pytest.importorskip("pytorch_metric_learning.utils.accuracy_calculator")
    calculator = accuracy.AccuracyCalculator(
        include=("precision_at_1", "r_precision", "mean_average_precision_at_r", "NMI"),
        k="max_bin_count",
        device=__import__("torch").device("cpu"),
    )
    return calculator.get_accuracy(*args)


@pytest.mark.parametrize("seed", [0, 1])
def test_same_set_matches_pytorch_metric_learning(seed):
    rng = np.random.default_rng(seed)
    vectors, labels = clustered(rng, 12, 25, 16)
    labels[:2] = [100, 101]  # singletons: excluded by pml too
    ours = evaluate_embeddings(vectors, labels, compute_nmi=False)
    theirs = pml_metrics(vectors, labels)
    assert ours.precision_at_1 == pytest.approx(theirs["precision_at_1"], abs=1e-9)
    assert ours.r_precision == pytest.approx(theirs["r_precision"], abs=1e-9)
    assert ours.map_at_r == pytest.approx(theirs["mean_average_precision_at_r"], abs=1e-9)


def test_separate_sets_match_pytorch_metric_learning():
    rng = np.random.default_rng(5)
    vectors, labels = clustered(rng, 10, 30, 16)
    order = rng.permutation(len(labels))
    queries, gallery = order[:100], order[100:]
    ours = evaluate_embeddings(vectors[queries], labels[queries], vectors[gallery], labels[gallery], compute_nmi=False)
    theirs = pml_metrics(vectors[queries], labels[queries], vectors[gallery], labels[gallery])
    assert ours.precision_at_1 == pytest.approx(theirs["precision_at_1"], abs=1e-9)
    assert ours.r_precision == pytest.approx(theirs["r_precision"], abs=1e-9)
    assert ours.map_at_r == pytest.approx(theirs["mean_average_precision_at_r"], abs=1e-9)


def test_nmi_with_faiss_default_seed_matches_pytorch_metric_learning():
    """pml's NMI runs faiss.Kmeans(niter=20) with faiss's default seed 1234: with that seed, ours is the same
    clustering and the same score (bench/bench_eval.py relies on this to compare NMI values)."""
    rng = np.random.default_rng(3)
    vectors, labels = clustered(rng, 9, 30, 16, noise=1.5)
    theirs = pml_metrics(vectors, labels)["NMI"]
    assert nmi_kmeans(vectors, labels, seed=1234, niter=20) == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_normalized_mutual_info_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 7, 500)
    predicted = np.where(rng.random(500) < 0.6, truth, rng.integers(0, 9, 500))
    assert normalized_mutual_info(truth, predicted) == pytest.approx(
        normalized_mutual_info_score(truth, predicted), abs=1e-12
    )
    assert normalized_mutual_info(truth, truth + 3) == pytest.approx(1.0)
    assert normalized_mutual_info(np.zeros(5), np.arange(5)) == normalized_mutual_info_score(np.zeros(5), np.arange(5))
    assert normalized_mutual_info(np.zeros(5), np.zeros(5)) == 1.0


def test_nmi_of_many_clusterings_at_once_matches_sklearn_row_by_row():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, 30)
    rows = np.stack([truth, truth + 7, np.zeros(30, dtype=int), rng.integers(0, 6, 30), np.arange(30)])
    expected = [normalized_mutual_info_score(truth, row) for row in rows]
    np.testing.assert_allclose(normalized_mutual_info_rows(truth, rows), expected, atol=1e-12)
    with pytest.raises(DataError, match="labellings of the 30 items"):
        normalized_mutual_info_rows(truth, rows[:, :5])


def test_nmi_kmeans_scores_its_own_clustering_and_is_deterministic():
    rng = np.random.default_rng(0)
    vectors, labels = clustered(rng, 8, 40, 16, noise=0.5)
    assignments = kmeans_assignments(vectors, 8, seed=3)
    expected = normalized_mutual_info_score(labels, assignments)
    assert nmi_kmeans(vectors, labels, seed=3) == pytest.approx(expected, abs=1e-12)
    assert nmi_kmeans(vectors, labels, seed=3) == nmi_kmeans(vectors, labels, seed=3)
    assert evaluate_embeddings(vectors, labels, seed=3).nmi == pytest.approx(expected, abs=1e-12)


def test_binary_nmi_clusters_sign_vectors():
    rng = np.random.default_rng(1)
    vectors, labels = clustered(rng, 6, 30, 24, noise=0.5)
    codes = binarize(vectors)
    expected = normalized_mutual_info_score(labels, kmeans_assignments(codes_to_signs(codes, 24), 6, seed=0))
    assert evaluate_embeddings(codes, labels, metric="hamming").nmi == pytest.approx(expected, abs=1e-12)


def test_to_dict_round_trip():
    metrics = RetrievalMetrics(0.5, 0.6, 0.7, {1: 0.7, 10: 0.9}, None, 12)
    values = metrics.to_dict()
    assert values["recall_at_k"] == {"1": 0.7, "10": 0.9} and values["num_queries"] == 12
    assert values["map_at_r"] == 0.5 and values["nmi"] is None


def test_default_recall_ks():
    assert default_recall_ks(100, 8000) == (1, 2, 4, 8)
    assert default_recall_ks(11316, 60502) == (1, 10, 100, 1000)
    assert default_recall_ks(30, 90) == (1, 10)
    assert default_recall_ks(2, 60) == (1, 2, 4, 8)
    assert default_recall_ks(2, 5) == (1,)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda v, y: evaluate_embeddings(v, y[:-1]), "exactly one label"),
        (lambda v, y: evaluate_embeddings(v, np.arange(len(v))), "no query has a gallery item"),
        (lambda v, y: evaluate_embeddings(v, y, metric="hamming"), "uint8 packed codes"),
        (lambda v, y: evaluate_embeddings(v, y, metric="cosine"), "known metrics: ip, hamming"),
        (lambda v, y: evaluate_embeddings(v, y, v[:, :3], y), "dimension"),
        (lambda v, y: evaluate_embeddings(v, y, v), "without gallery_labels"),
        (lambda v, y: evaluate_embeddings(v, y, ks=(0, 1)), "positive integers"),
        (lambda v, y: evaluate_embeddings(np.full_like(v, np.nan), y), "NaN"),
        (lambda v, y: evaluate_embeddings(v, y, v, y.astype(str), compute_nmi=False), "use one label type"),
    ],
)
def test_bad_input_raises_one_clear_error(call, message):
    vectors, labels = clustered(np.random.default_rng(0), 3, 4, 8)
    with pytest.raises(DataError, match=message):
        call(vectors, labels)
