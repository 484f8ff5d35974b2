"""The protocol through an index built from chosen embeddings: exact, as built, and the grid neighbours.

tests/test_protocol.py holds the rule and its brute-force oracle; here the embeddings are chosen so
that query-only items crowd the gallery out of every shortlist, the case a guessed shortlist size
gets wrong, and so that float16 storage changes no ranking.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from reference_hamming import hamming_distances
from test_protocol import assert_equal_to, brute_force  # the brute-force oracle of the protocol

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
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.build.builder import write_index
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.files.index_store import IndexStore

KS = (1, 2, 4)


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
            expected = brute_force(similarities(vectors, kind), labels, is_query, is_gallery, KS)
            assert_equal_to(exact[kind], expected, KS)
            assert_equal_to(report.metrics[kind], expected, KS)
            if kind == "float" or kinds[1] == "flat":  # binary IVF ranks equal Hamming distances its own way
                assert_equal_to(as_built_metrics(store, data, KS, kind), expected, KS)


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
        expected = brute_force(similarities(vectors, "float"), labels, is_query, is_gallery, (1, 2))
        assert_equal_to(as_built_metrics(store, data, (1, 2), "float"), expected, (1, 2))
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
