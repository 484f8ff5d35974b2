"""Whitening and ITQ against hand-computed cases, their properties, and the model layer they become."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import ModelConfig, WhiteningConfig
from retrieval.training.model.embedding_model import build_embedding_model, with_whitening, without_whitening
from retrieval.training.model.itq import fit_itq, orthonormal_rows, quantization_error, signs
from retrieval.training.model.whitening import (
    LinearMap,
    fit_pca_whitening,
    fit_supervised_whitening,
    fit_whitenings,
)
from retrieval.training.run.measures.whitening_stage import Candidate, choose, fit_map

# four 2-D points centred at (1, 1): variance 2 along x, 0.5 along y, no covariance
PCA_POINTS = np.array([[3.0, 1.0], [-1.0, 1.0], [1.0, 2.0], [1.0, 0.0]])


def test_pca_whitening_of_four_points_by_hand() -> None:
    basis = fit_pca_whitening(PCA_POINTS, shrinkage=0.0)
    np.testing.assert_allclose(basis.mean, [1.0, 1.0])
    # axes x (variance 2) then y (variance 0.5), each divided by its standard deviation
    np.testing.assert_allclose(np.abs(basis.projection), [[1 / np.sqrt(2), 0.0], [0.0, 1 / np.sqrt(0.5)]], atol=1e-12)
    one = basis.map(1)
    assert one.dim == 1
    np.testing.assert_allclose(np.abs(PCA_POINTS @ one.weight + one.bias).ravel(), [np.sqrt(2), np.sqrt(2), 0, 0])


def test_shrinkage_pulls_the_variances_towards_their_mean() -> None:
    basis = fit_pca_whitening(PCA_POINTS, shrinkage=0.5)
    # (1 - 0.5) * [2, 0.5] + 0.5 * mean(2, 0.5) = [1.625, 0.875]
    np.testing.assert_allclose(np.abs(np.diag(basis.projection)), 1 / np.sqrt([1.625, 0.875]), atol=1e-12)


def test_supervised_whitening_of_two_classes_by_hand() -> None:
    # each class: 4 points around its mean, (+-a, 0) and (0, +-b); class means (0, -1) and (0, 1)
    a, b = 2.0, 0.5
    offsets = np.array([[a, 0], [-a, 0], [0, b], [0, -b]])
    points = np.vstack([offsets + [0.0, -1.0], offsets + [0.0, 1.0]])
    labels = ["p"] * 4 + ["q"] * 4
    basis = fit_supervised_whitening(points, labels, shrinkage=0.0)
    # within-class covariance diag(a^2/2, b^2/2); total diag(a^2/2, b^2/2 + 1): whitened, y spreads 1 + 2/b^2
    # against x's 1, so y leads, scaled by 1/sqrt(b^2/2)
    one = basis.map(1)
    np.testing.assert_allclose(np.abs(one.weight.ravel()), [0.0, np.sqrt(2) / b], atol=1e-12)
    np.testing.assert_allclose(one.bias, 0.0, atol=1e-12)
    np.testing.assert_allclose(np.abs(basis.map(2).weight), [[0, np.sqrt(2) / a], [np.sqrt(2) / b, 0]], atol=1e-12)
    shrunk = fit_supervised_whitening(points, labels, shrinkage=0.5).map(1)
    within_y = 0.5 * b**2 / 2 + 0.5 * (a**2 / 2 + b**2 / 2) / 2
    np.testing.assert_allclose(np.abs(shrunk.weight.ravel()), [0.0, 1 / np.sqrt(within_y)], atol=1e-12)


def test_whitened_covariances_are_the_identity() -> None:
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(20), 30)
    points = rng.standard_normal((20, 6))[labels] * 3 + rng.standard_normal((600, 6)) @ rng.standard_normal((6, 6))
    for basis in (fit_pca_whitening(points, shrinkage=0.0), fit_supervised_whitening(points, labels, shrinkage=0.0)):
        mapped = points @ basis.projection - basis.mean @ basis.projection
        np.testing.assert_allclose(mapped.mean(axis=0), 0.0, atol=1e-9)
        if basis.method == "pca":
            np.testing.assert_allclose(np.cov(mapped.T, bias=True), np.eye(6), atol=1e-9)
        else:  # the within-class scatter is whitened
            means = np.stack([mapped[labels == c].mean(axis=0) for c in range(20)])
            within = mapped - means[labels]
            np.testing.assert_allclose(within.T @ within / len(within), np.eye(6), atol=1e-9)


@pytest.mark.parametrize(("dim", "bits"), [(8, 8), (8, 32)])
def test_an_orthogonal_map_leaves_float_rankings_unchanged(dim: int, bits: int) -> None:
    for seed in range(5):  # random data, random and learned rotations
        rng = np.random.default_rng(seed)
        vectors = rng.standard_normal((40, dim)) * rng.uniform(0.2, 3.0, dim)
        for rotation in (orthonormal_rows(dim, bits, seed), fit_itq(vectors, bits, iterations=5, seed=seed)):
            np.testing.assert_allclose(rotation @ rotation.T, np.eye(dim), atol=1e-9)
            before = LinearMap(np.eye(dim), np.zeros(dim)).apply(vectors)
            after = LinearMap(np.eye(dim), np.zeros(dim)).then(rotation).apply(vectors)
            np.testing.assert_allclose(after @ after.T, before @ before.T, atol=1e-5)
            scores = before @ before.T
            np.testing.assert_array_equal(
                np.argsort(-np.round(scores, 4), kind="stable"),
                np.argsort(-np.round(after @ after.T, 4), kind="stable"),
            )


def test_itq_codes_quantize_better_than_the_plain_sign() -> None:
    rng = np.random.default_rng(0)
    # correlated, anisotropic data (as whitened-then-truncated embeddings are not): the plain sign fits it badly
    vectors = rng.standard_normal((2000, 16)) @ (rng.standard_normal((16, 16)) * np.linspace(3.0, 0.1, 16))
    plain = quantization_error(vectors, np.eye(16))
    learned = fit_itq(vectors, 16, iterations=30)
    assert quantization_error(vectors, learned) < 0.8 * plain
    errors = [quantization_error(vectors, fit_itq(vectors, 16, iterations=n)) for n in (0, 1, 5, 30)]
    assert errors == sorted(errors, reverse=True)  # each ITQ step lowers the error from the same start
    # and to more bits: a learned expansion beats a random one
    assert quantization_error(vectors, fit_itq(vectors, 64, iterations=30)) < quantization_error(
        vectors, orthonormal_rows(16, 64)
    )
    np.testing.assert_array_equal(signs(np.array([-0.5, 0.0, 0.5])), [-1.0, 1.0, 1.0])


def test_the_choice_is_the_first_best_on_validation() -> None:
    maps = [LinearMap(np.eye(2) * (i + 1), np.zeros(2)) for i in range(3)]
    found = [Candidate(None, None), Candidate("pca", 4, 0.1, maps[0]), Candidate("supervised", 4, 0.1, maps[1])]
    found.append(Candidate("supervised", 8, 0.1, maps[2]))
    scores = {"none": 0.1, "pca-4-s0.1": 0.3, "supervised-4-s0.1": 0.3, "supervised-8-s0.1": 0.2}
    best, measured = choose(found, lambda linear: scores[next(c.name for c in found if c.linear is linear)])
    assert best.name == "pca-4-s0.1" and measured == scores


def test_an_open_choice_without_validation_classes_is_refused() -> None:
    points = np.random.default_rng(0).standard_normal((30, 4))
    for open_choice in ({"method": "auto", "dim": 2, "shrinkage": 0.1}, {"method": "pca", "dim": 2}):
        with pytest.raises(ConfigError, match="validation classes"):
            fit_map(WhiteningConfig(**open_choice), points, [0] * 30, None)  # type: ignore[arg-type]
    settings = WhiteningConfig(method="pca", dim=2, shrinkage=0.1, bits=512, itq_iterations=2)
    linear, report = fit_map(settings, points, [0] * 30, None)
    assert linear is not None and linear.dim == 512 and report["method"] == "pca" and report["dim"] == 2
    assert report["quantization_error"]["learned"] <= report["quantization_error"]["plain"]


def test_when_no_whitening_wins_the_code_is_still_learned_and_floats_keep_their_order() -> None:
    rng = np.random.default_rng(0)
    points = LinearMap(np.eye(8), np.zeros(8)).apply(rng.standard_normal((200, 8)) * np.linspace(3, 0.2, 8) + 0.5)
    settings = WhiteningConfig(method="auto", dim=4, shrinkage=0.1, bits=512, itq_iterations=5)
    linear, report = fit_map(
        settings, points, np.repeat(np.arange(20), 10), lambda linear: 1.0 if linear is None else 0.0
    )
    assert report["method"] == "none" and linear is not None and linear.dim == 512
    mapped = linear.apply(points)
    np.testing.assert_allclose(mapped @ mapped.T, points @ points.T, atol=1e-5)
    assert report["quantization_error"]["learned"] < report["quantization_error"]["plain"]


def test_the_model_layer_is_the_numpy_map() -> None:
    torch.manual_seed(0)
    model = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=8)).eval()
    images = torch.randn(4, 3, 32, 32)
    linear = LinearMap(np.random.default_rng(0).standard_normal((8, 16)), np.random.default_rng(1).standard_normal(16))
    whitened = with_whitening(model, linear.weight, linear.bias).eval()
    with torch.no_grad():
        expected = linear.apply(model(images).numpy())
        np.testing.assert_allclose(whitened(images).numpy(), expected, atol=1e-5)
        np.testing.assert_allclose(without_whitening(whitened)(images).numpy(), model(images).numpy(), atol=1e-6)
    assert whitened.embedding_dim == 16 and model.whitening is None
    rebuilt = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=8, whitened_dim=16))
    rebuilt.load_state_dict(whitened.state_dict())  # a checkpoint's model section rebuilds it


def _shrunk(covariance: np.ndarray, shrinkage: float) -> np.ndarray:
    size = covariance.shape[0]
    return (1.0 - shrinkage) * covariance + shrinkage * (np.trace(covariance) / size) * np.eye(size)


def _eigh(symmetric: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = np.linalg.eigh(symmetric)
    return values[::-1], vectors[:, ::-1]


def _direct_whitening(method: str, points: np.ndarray, labels: np.ndarray, shrinkage: float) -> np.ndarray:
    """The projection as first written: each shrinkage's covariances shrunk, then decomposed, one by one."""
    centred = points - points.mean(axis=0)
    total = centred.T @ centred / len(centred)
    if method == "pca":
        variances, axes = _eigh(_shrunk(total, shrinkage))
        return axes / np.sqrt(variances)
    means = np.stack([centred[labels == c].mean(axis=0) for c in np.unique(labels)])
    within = centred - means[np.searchsorted(np.unique(labels), labels)]
    spread, axes = _eigh(_shrunk(within.T @ within / len(within), shrinkage))
    whiten = axes / np.sqrt(spread)
    _, leading = _eigh(whiten.T @ total @ whiten)
    return whiten @ leading


@pytest.mark.parametrize("method", ["pca", "supervised"])
def test_the_shared_decomposition_is_the_direct_one_at_every_shrinkage(method: str) -> None:
    # fit_whitenings decomposes once for every shrinkage (eigenvalues shifted, eigenvectors kept): the same axes
    # (up to each axis's sign) as shrinking, then decomposing, for each; hence the same float rankings
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(12), 15)
    points = rng.standard_normal((12, 10))[labels] + rng.standard_normal((180, 10)) @ rng.standard_normal((10, 10))
    shrinkages = [0.0, 0.1, 0.6]
    for shrinkage, basis in zip(shrinkages, fit_whitenings(method, points, labels, shrinkages)):  # type: ignore[arg-type]
        direct = _direct_whitening(method, points, labels, shrinkage)
        signs_ = np.sign(np.sum(direct * basis.projection, axis=0))
        np.testing.assert_allclose(basis.projection, direct * signs_, rtol=1e-7, atol=1e-9)
        mapped, reference = basis.map(6).apply(points), LinearMap(direct[:, :6], -points.mean(axis=0) @ direct[:, :6])
        scores, expected = mapped @ mapped.T, reference.apply(points) @ reference.apply(points).T
        np.testing.assert_array_equal(np.argsort(-scores, axis=1)[:, :5], np.argsort(-expected, axis=1)[:, :5])


def test_itq_steps_are_those_of_the_direct_loop() -> None:
    # fit_itq's codes (np.where) and one-thread Procrustes: the rotation of the loop as first written
    vectors = np.random.default_rng(4).standard_normal((200, 8))
    values = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    rotation = orthonormal_rows(8, 32, 0)
    for _ in range(4):
        codes = (values @ rotation.astype(np.float32) >= 0).astype(np.float32) * 2 - 1
        u, _, vt = np.linalg.svd(values.T.astype(np.float64) @ codes, full_matrices=False)
        rotation = u @ vt
    np.testing.assert_allclose(fit_itq(vectors, 32, iterations=4), rotation, atol=1e-6)
