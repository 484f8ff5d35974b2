"""The width of a calibration (``indexing.probability.interval``) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.indexing.common.score_calibration import LogitInterval
from retrieval.indexing.probability.interval import jackknife_interval, t_quantile
from retrieval.indexing.probability.logistic import logistic_parameters


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_the_interval_of_a_probability_is_the_logit_plus_or_minus_t_times_its_standard_error() -> None:
    interval = LogitInterval(classes=4, covariance=[[0.04, 0.0], [0.0, 0.01]], multiplier=2.0)
    low, high = interval.bounds(np.array([0.5]), np.array([0.5]))
    # logit 0; variance 0.5^2 * 0.04 + 0.01 = 0.02; half-width 2 * sqrt(0.02) = 0.28284
    assert low[0] == pytest.approx(_sigmoid(-2 * math.sqrt(0.02)))
    assert high[0] == pytest.approx(_sigmoid(2 * math.sqrt(0.02)))
    assert (low[0], high[0]) == pytest.approx((0.42976, 0.57024), abs=1e-5)


def test_one_class_has_no_spread_to_measure_and_its_interval_is_everything() -> None:
    interval = jackknife_interval(np.array([0.1, 0.9]), np.array([0, 1]), np.array(["a", "a"]), logistic_parameters)
    assert interval.classes == 1
    low, high = interval.bounds(np.array([0.3]), np.array([0.7]))
    assert (low[0], high[0]) == (0.0, 1.0)


def test_the_jackknife_covariance_over_three_classes_matches_the_hand_computation() -> None:
    # a stand-in "fit" whose parameters are the mean score and the mean outcome, so every leave-one-out is by hand
    def means(scores: np.ndarray, same: np.ndarray) -> tuple[float, float]:
        return float(scores.mean()), float(same.mean())

    scores, same, classes = np.array([1.0, 2.0, 3.0]), np.array([1, 0, 1]), np.array(["a", "b", "c"])
    interval = jackknife_interval(scores, same, classes, means)
    # leave-one-out: (2.5, 0.5), (2, 1), (1.5, 0.5); mean (2, 2/3); (G-1)/G * sum of outer products
    assert np.array(interval.covariance) == pytest.approx(np.array([[1 / 3, 0.0], [0.0, 1 / 9]]))
    assert interval.multiplier == pytest.approx(4.303) and interval.classes == 3


def test_fewer_classes_give_a_wider_multiplier() -> None:
    assert t_quantile(1) == pytest.approx(12.706) and t_quantile(3) == pytest.approx(3.182)
    assert t_quantile(24) == pytest.approx(2.064) and t_quantile(500) == 1.96
    assert t_quantile(0) == 0.0
