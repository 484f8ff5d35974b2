"""The calibration fit against hand-made cases: known precision per score, a known score distribution, and
the reliability figures computed by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from retrieval.indexing.common.score_calibration import ScoreCalibration, calibration_sentence, shift_base_rate
from retrieval.indexing.probability.fitting import fit_score_calibration
from retrieval.indexing.probability.held_out import held_out_reports
from retrieval.indexing.probability.logistic import fit_logistic, logistic_parameters
from retrieval.indexing.probability.pair_scores import LabelledSet, all_pairs, top_hits
from retrieval.indexing.probability.reliability import at_cutoff, calibration_report, expected_calibration_error
from retrieval.indexing.search.binary import binarize, hamming_to_similarity

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # the isotonic fit: a bench comparison

from isotonic_fit import fit_isotonic, pool_adjacent_violators  # noqa: E402


def _pairs(per_score: dict[float, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Pairs at each score: (pairs, of which same class)."""
    scores, same = [], []
    for score, (count, positives) in per_score.items():
        scores += [score] * count
        same += [True] * positives + [False] * (count - positives)
    return np.array(scores), np.array(same)


def test_isotonic_fit_returns_the_precision_of_each_score_when_it_rises() -> None:
    scores, same = _pairs({0.1: (1000, 100), 0.4: (1000, 300), 0.7: (1000, 600), 0.9: (1000, 900)})
    curve = fit_isotonic(scores, same)
    assert curve.scores == pytest.approx([0.1, 0.4, 0.7, 0.9])
    assert curve(np.array([0.1, 0.4, 0.7, 0.9])) == pytest.approx([101 / 1002, 301 / 1002, 601 / 1002, 901 / 1002])
    assert curve(np.array([0.55]))[0] == pytest.approx((301 + 601) / 2 / 1002)  # straight between knots
    assert curve(np.array([-1.0, 1.0])) == pytest.approx([101 / 1002, 901 / 1002])  # flat beyond


def test_isotonic_fit_pools_a_score_whose_precision_falls() -> None:
    scores, same = _pairs({0.1: (100, 30), 0.2: (100, 10), 0.5: (100, 80)})
    curve = fit_isotonic(scores, same)
    assert curve.scores == pytest.approx([0.15, 0.5])  # the pooled block sits at its mean score
    assert curve.probabilities == pytest.approx([41 / 202, 81 / 102])


def test_pool_adjacent_violators_matches_a_brute_force_least_squares_fit() -> None:
    rng = np.random.default_rng(3)
    values, weights = rng.random(9), rng.integers(1, 5, 9).astype(float)
    means, totals, starts = pool_adjacent_violators(values, weights)
    fitted = np.repeat(means, np.diff(np.append(starts, len(values))))
    assert np.all(np.diff(fitted) >= 0)
    # every other non-decreasing vector does worse: check against many random monotone candidates
    loss = (weights * (fitted - values) ** 2).sum()
    candidates = np.sort(rng.random((20000, len(values))), axis=1)
    assert loss <= (weights * (candidates - values) ** 2).sum(axis=1).min() + 1e-12
    sklearn = pytest.importorskip("sklearn.isotonic")
    reference = sklearn.IsotonicRegression().fit(np.arange(len(values)), values, sample_weight=weights)
    assert fitted == pytest.approx(reference.predict(np.arange(len(values))))


def _gaussian_pairs(base_rate: float, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    same = rng.random(n) < base_rate
    return np.where(same, rng.normal(0.7, 0.1, n), rng.normal(0.3, 0.1, n)), same


def _true_probability(score: np.ndarray, base_rate: float) -> np.ndarray:
    """P(same | score) of the two Gaussians of ``_gaussian_pairs`` (equal widths: the odds are exponential)."""
    log_ratio = ((score - 0.3) ** 2 - (score - 0.7) ** 2) / (2 * 0.1**2)
    odds = np.exp(log_ratio) * base_rate / (1 - base_rate)
    return odds / (1 + odds)


def test_fits_recover_a_known_score_distribution_and_shift_to_another_base_rate() -> None:
    scores, same = _gaussian_pairs(0.2, 200_000)
    grid = np.array([0.4, 0.45, 0.5, 0.55, 0.6])
    for curve in (fit_isotonic(scores, same), fit_logistic(scores, same)):
        assert curve(grid) == pytest.approx(_true_probability(grid, 0.2), abs=0.03)
        shifted = shift_base_rate(curve(grid), 0.2, 0.04)
        assert shifted == pytest.approx(_true_probability(grid, 0.04), abs=0.03)
    a, _ = logistic_parameters(scores, same)
    assert a == pytest.approx(0.4 / 0.1**2, rel=0.05)  # the log-odds slope of the two Gaussians


def test_a_logistic_fit_of_scores_that_fall_with_the_class_is_flat_at_the_share() -> None:
    scores, same = _pairs({0.1: (100, 60), 0.9: (100, 20)})  # the higher score, the fewer same-class pairs
    curve = fit_logistic(scores, same)
    assert curve.probabilities == pytest.approx([0.4] * len(curve.probabilities))


def test_ece_and_cutoffs_by_hand() -> None:
    probabilities = np.array([0.1] * 10 + [0.9] * 10)
    same = np.array([True] + [False] * 9 + [True] * 5 + [False] * 5)
    assert expected_calibration_error(probabilities, same) == pytest.approx(0.5 * 0.0 + 0.5 * 0.4)
    cut = at_cutoff(probabilities, same, 0.8)
    assert (cut.precision, cut.recall_kept, cut.hits_kept) == (pytest.approx(0.5), pytest.approx(5 / 6), 10)
    assert at_cutoff(probabilities, same, 0.95).precision is None
    report = calibration_report(probabilities, same, base_rate=0.3)
    assert [b.hits for b in report.bins] == [10, 10] and report.bins[1].same_class == pytest.approx(0.5)


def _toy_set(seed: int = 0, classes: int = 6, per_class: int = 8, dim: int = 16) -> LabelledSet:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, dim))
    labels = np.repeat(np.arange(classes), per_class)
    vectors = centres[labels] + rng.normal(scale=1.2, size=(len(labels), dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    flags = np.ones(len(labels), bool)
    return LabelledSet(vectors.astype(np.float32), labels, flags, flags)


def test_pairs_score_as_a_search_does_and_never_pair_a_query_with_itself() -> None:
    data = _toy_set()
    n = len(data.labels)
    scores, same, queries = all_pairs(data, "float")
    assert (len(scores), queries, int(same.sum())) == (n * (n - 1), n, 6 * 8 * 7)
    expected = [data.embeddings[i] @ data.embeddings[j] for i in range(n) for j in range(n) if i != j]
    assert np.sort(scores) == pytest.approx(np.sort(expected), abs=1e-5)
    codes = binarize(data.embeddings)
    hamming = np.unpackbits(codes[:, None, :] ^ codes[None, :, :], axis=2).sum(axis=2)
    binary = hamming_to_similarity(hamming, 16)[~np.eye(n, dtype=bool)]
    assert np.sort(all_pairs(data, "binary")[0]) == pytest.approx(np.sort(binary), abs=1e-5)
    assert data.base_rate() == pytest.approx(7 / (n - 1))
    top, _ = top_hits(data, "float", 3)
    assert (
        len(top) == 3 * n
        and top.min()
        >= np.sort(np.where(np.eye(n, dtype=bool), -9, data.embeddings @ data.embeddings.T), axis=1)[:, -3].min() - 1e-6
    )


def test_calibration_records_what_it_rests_on_and_flags_too_few_classes() -> None:
    calibration = fit_score_calibration(_toy_set(classes=2))
    assert calibration is not None and not calibration.reliable
    assert calibration.fitted_on.classes == 2 and calibration.fitted_on.pairs == 16 * 10  # first 10 hits each
    assert calibration.sentence.startswith("unreliable calibration: it rests on 2 validation classes")
    again = ScoreCalibration.model_validate_json(calibration.model_dump_json())
    scores = np.linspace(-1, 1, 9)
    assert again.probabilities("binary", scores) == pytest.approx(calibration.probabilities("binary", scores))
    assert np.all(np.diff(again.probabilities("float", scores)) >= 0)
    assert fit_score_calibration(_toy_set(classes=6)).reliable  # type: ignore[union-attr]


def _classes(classes: int, first_label: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    data = _toy_set(seed, classes=classes)
    return data.embeddings, data.labels + first_label


def test_distractors_join_the_gallery_never_the_queries_and_the_fit_records_them() -> None:
    validation = _toy_set(classes=2)
    embeddings, labels = _classes(3, 100, seed=1)
    fitting = validation.with_distractors(embeddings, labels)
    assert (len(fitting.queries), len(fitting.gallery)) == (16, 16 + 24)
    assert int(fitting.distractor_mask().sum()) == 24
    assert np.array_equal(fitting.without_distractors().embeddings, validation.embeddings)
    scores, same = top_hits(fitting, "float", 10)
    gallery = fitting.embeddings[fitting.gallery]
    everything = validation.embeddings @ gallery.T
    everything[np.arange(16), np.arange(16)] = -np.inf  # never itself
    assert np.sort(scores) == pytest.approx(np.sort(np.sort(everything, axis=1)[:, -10:].ravel()), abs=1e-5)
    assert same.sum() < top_hits(validation, "float", 10)[1].sum()  # other classes took some first places
    calibration = fit_score_calibration(fitting)
    assert calibration is not None
    assert (calibration.fitted_on.queries, calibration.fitted_on.gallery, calibration.fitted_on.distractors) == (
        16,
        40,
        24,
    )
    assert "searched among 40 images, 24 of them training images of other classes" in calibration.sentence


def test_a_fit_among_as_many_classes_as_the_test_gallery_holds_there_and_one_on_few_classes_does_not() -> None:
    """The base rate of issue 48: 4 validation classes alone make first hits mostly of the query's class, so
    their curve says "same class" far too often in a 20-class test gallery; with 16 other classes beside them
    (the training images) the first hits mix classes as the test's do, and the ECE falls."""
    validation = _toy_set(0, classes=4)
    distractors = _classes(16, 100, seed=10)
    test = _toy_set(20, classes=20)
    alone = held_out_reports(fit_score_calibration(validation), test)  # type: ignore[arg-type]
    among = held_out_reports(fit_score_calibration(validation.with_distractors(*distractors)), test)  # type: ignore[arg-type]
    for kind in ("float", "binary"):
        assert alone[kind].ece > 0.3 and among[kind].ece < 0.15, (kind, alone[kind].ece, among[kind].ece)


def test_a_calibration_stored_before_the_gallery_was_recorded_still_loads() -> None:
    stored = fit_score_calibration(_toy_set()).model_dump(mode="json")  # type: ignore[union-attr]
    del stored["fitted_on"]["gallery"], stored["fitted_on"]["distractors"]
    again = ScoreCalibration.model_validate(stored)
    assert (again.fitted_on.gallery, again.fitted_on.distractors) == (0, 0)
    assert "searched among" not in calibration_sentence(again.fitted_on)
