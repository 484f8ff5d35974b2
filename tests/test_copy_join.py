"""The near-copy self-join and its groups against brute force, on codes with planted copies."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest
from PIL import Image
from reference_hamming import hamming_distances

from retrieval.indexing.duplicates import copy_join
from retrieval.indexing.duplicates.copy_groups import copy_groups
from retrieval.indexing.duplicates.copy_join import near_copy_pairs
from retrieval.indexing.duplicates.pixel_hash import exact_copy_sets, pixel_digests
from retrieval.indexing.search.binary import binarize

BITS = 256


def planted(n: int, copies: int, flips: int, seed: int = 0) -> tuple[np.ndarray, set[tuple[int, int]]]:
    """Random codes of ``n`` items, the last ``copies`` each a copy of an earlier one with ``flips`` bits flipped."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, (n, BITS), dtype=np.uint8)
    truth = set()
    for row in range(n - copies, n):
        source = int(rng.integers(0, n - copies))
        bits[row] = bits[source]
        bits[row, rng.choice(BITS, flips, replace=False)] ^= 1
        truth.add((source, row))
    return np.packbits(bits, axis=1, bitorder="little"), truth


def brute_pairs(codes: np.ndarray, threshold: float) -> dict[tuple[int, int], float]:
    similarity = 1.0 - 2.0 * hamming_distances(codes, codes) / BITS
    rows, cols = np.nonzero(np.triu(similarity >= threshold - 1e-6, k=1))
    return {(int(a), int(b)): float(similarity[a, b]) for a, b in zip(rows, cols)}


def as_dict(pairs: copy_join.CopyPairs) -> dict[tuple[int, int], float]:
    return {(int(a), int(b)): float(s) for a, b, s in zip(pairs.first, pairs.second, pairs.score)}


def test_exact_join_finds_every_pair_brute_force_finds() -> None:
    codes, truth = planted(600, 40, flips=12)
    pairs = near_copy_pairs(codes, BITS, 0.8, progress=False)
    expected = brute_pairs(codes, 0.8)
    assert truth <= set(expected)  # 12 flips of 256 bits: similarity 0.906
    assert as_dict(pairs) == pytest.approx(expected)
    assert list(pairs.score) == sorted(pairs.score, reverse=True)
    assert all(pairs.first < pairs.second)


def test_ivf_join_recalls_the_planted_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_join, "EXACT_BELOW", 100)  # the path a large collection takes
    codes, truth = planted(3000, 150, flips=10)
    found = set(as_dict(near_copy_pairs(codes, BITS, 0.8, progress=False)))
    assert found <= set(brute_pairs(codes, 0.8))  # nothing below the threshold
    assert len(found & truth) >= 0.95 * len(truth)


def test_ivf_join_on_the_first_bits_scores_pairs_on_the_full_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_join, "EXACT_BELOW", 100)
    monkeypatch.setattr(copy_join, "SEARCH_BITS", 64)  # the index sees a quarter of each code
    codes, truth = planted(3000, 150, flips=10)
    found = as_dict(near_copy_pairs(codes, BITS, 0.8, progress=False))
    expected = brute_pairs(codes, 0.8)
    assert set(found) <= set(expected) and found == pytest.approx({pair: expected[pair] for pair in found})
    assert len(set(found) & truth) >= 0.95 * len(truth)


def test_the_join_leaves_the_callers_openmp_threads_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_join, "EXACT_BELOW", 100)
    before = faiss.omp_get_max_threads()
    codes, _ = planted(1000, 50, flips=10)
    near_copy_pairs(codes, BITS, 0.8, progress=False)  # its workers run one OpenMP thread each
    assert faiss.omp_get_max_threads() == before


def test_float_recheck_keeps_the_pairs_cosine_keeps() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(400, BITS)).astype(np.float32)
    vectors[350:] = vectors[:50] + rng.normal(scale=0.25, size=(50, BITS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pairs = near_copy_pairs(binarize(vectors), BITS, 0.7, embeddings=vectors, float_threshold=0.9, progress=False)
    cosine = vectors @ vectors.T
    rows, cols = np.nonzero(np.triu(cosine >= 0.9, k=1))
    assert set(as_dict(pairs)) == set(zip(rows.tolist(), cols.tolist()))
    assert len(pairs) == 50
    for (a, b), score in as_dict(pairs).items():
        assert score == pytest.approx(cosine[a, b], abs=1e-5)


def test_groups_are_the_connected_components_largest_first() -> None:
    first, second = np.array([5, 0, 1, 7, 9]), np.array([6, 1, 2, 8, 8])
    groups = copy_groups(first, second, 10)
    assert [g.tolist() for g in groups] == [[0, 1, 2], [7, 8, 9], [5, 6]]
    assert copy_groups(np.array([], int), np.array([], int), 3) == []


def test_pixel_hash_matches_same_pixels_in_other_formats(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8))
    image.save(tmp_path / "a.png")
    image.save(tmp_path / "b.bmp")  # same pixels, another container
    image.save(tmp_path / "c.jpg", quality=90)  # lossy: other pixels
    Image.fromarray(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8)).save(tmp_path / "d.png")
    (tmp_path / "e.png").write_bytes(b"not an image")
    (tmp_path / "f.png").write_bytes(b"not an image")
    paths = [tmp_path / name for name in ("a.png", "b.bmp", "c.jpg", "d.png", "e.png", "f.png")]
    digests = pixel_digests(paths, progress=False)
    assert exact_copy_sets(digests) == [[0, 1]]
