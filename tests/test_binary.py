"""Sign binarisation: bit order faiss expects, round trips, Hamming distances."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
from reference_hamming import hamming_distances

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.binary import (
    binarize,
    codes_to_signs,
    hamming_to_similarity,
    unpack_bits,
)


@pytest.mark.parametrize("dim", [8, 64, 2048])
def test_binarize_matches_faiss_real_to_binary(dim):
    values = np.random.default_rng(dim).standard_normal((7, dim)).astype(np.float32)
    expected = np.zeros((7, dim // 8), dtype=np.uint8)
    faiss.real_to_binary(values.size, faiss.swig_ptr(values), faiss.swig_ptr(expected))
    np.testing.assert_array_equal(binarize(values), expected)


@pytest.mark.parametrize("dim", [1, 13, 64, 100])
def test_unpack_round_trip_and_threshold(dim):
    values = np.random.default_rng(dim).standard_normal((9, dim))
    codes = binarize(values, threshold=0.3)
    assert codes.shape == (9, -(-dim // 8)) and codes.dtype == np.uint8
    np.testing.assert_array_equal(unpack_bits(codes, dim), (values > 0.3).astype(np.uint8))
    np.testing.assert_array_equal(codes_to_signs(codes, dim), np.where(values > 0.3, 1.0, -1.0))
    np.testing.assert_array_equal(binarize(unpack_bits(codes, dim).astype(np.float32), threshold=0.5), codes)


def test_faiss_hamming_equals_numpy_popcount_of_xor():
    rng = np.random.default_rng(0)
    queries = binarize(rng.standard_normal((40, 2048)))
    gallery = binarize(rng.standard_normal((300, 2048)))
    index = faiss.IndexBinaryFlat(2048)
    index.add(gallery)
    distances, ids = index.search(queries, 300)
    expected = np.unpackbits(queries[:, None, :] ^ gallery[None, :, :], axis=2).sum(axis=2)
    np.testing.assert_array_equal(distances, np.take_along_axis(expected, ids, axis=1))
    np.testing.assert_array_equal(hamming_distances(queries, gallery), expected)


def test_similarity_is_cosine_of_sign_vectors():
    rng = np.random.default_rng(1)
    values = rng.standard_normal((6, 40))
    codes = binarize(values)
    signs = codes_to_signs(codes, 40)
    cosine = signs @ signs.T / 40
    np.testing.assert_allclose(hamming_to_similarity(hamming_distances(codes, codes), 40), cosine, atol=1e-6)


def test_bad_input_raises_data_error():
    with pytest.raises(DataError, match="2-D float"):
        binarize(np.zeros(8))
    with pytest.raises(DataError, match="uint8"):
        unpack_bits(np.zeros((2, 2), dtype=np.int32), 16)
    with pytest.raises(DataError, match="does not fit"):
        unpack_bits(np.zeros((2, 2), dtype=np.uint8), 17)
