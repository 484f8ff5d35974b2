"""An honest width for a Platt fit: how far its probabilities may move on classes it was not fitted on.

The pairs a fit rests on are not independent: the queries of one class share their look-alikes, so a fit on
4 classes knows about 4 classes, however many pairs they make. The width is therefore computed over classes:
the fit is repeated with each fitting class left out (the jackknife), the spread of the (slope, intercept)
pairs gives their covariance ``(G - 1) / G * sum_g (theta_g - mean)(theta_g - mean)^T`` over the ``G``
classes, and a score's logit ``a * s + b`` carries the interval ``+- t * sqrt(x^T C x)`` with ``x = (s, 1)``
and ``t`` Student's 97.5 % quantile with ``G - 1`` degrees of freedom (few classes: a wide multiplier, 12.7 at
2 classes, 3.18 at 4, 2.06 at 25). Below 2 classes there is no spread to measure: the interval is [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retrieval.indexing.common.score_calibration import LogitInterval

# Student's t, 97.5 % quantile, by degrees of freedom 1..30; beyond 30 the normal's 1.96 is within 4 %.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile(degrees_of_freedom: int) -> float:
    """Student's t 97.5 % quantile (0 below one degree of freedom: no interval is computed there)."""
    if degrees_of_freedom < 1:
        return 0.0
    return _T975[degrees_of_freedom - 1] if degrees_of_freedom <= len(_T975) else 1.96


Parameters = Callable[[np.ndarray, np.ndarray], tuple[float, float]]


def jackknife_interval(
    scores: np.ndarray, same: np.ndarray, classes: np.ndarray, parameters: Parameters
) -> LogitInterval:
    """The interval of a (slope, intercept) fit, ``parameters`` (Platt's: ``calibration.logistic``), on
    (``scores``, ``same``) whose pairs belong to ``classes`` (their query's)."""
    names = np.unique(classes)
    if len(names) < 2:
        return LogitInterval(classes=len(names), covariance=[[0.0, 0.0], [0.0, 0.0]], multiplier=0.0)
    thetas = np.array([parameters(scores[classes != name], same[classes != name]) for name in names])
    centred = thetas - thetas.mean(axis=0)
    covariance = (len(names) - 1) / len(names) * centred.T @ centred
    return LogitInterval(classes=len(names), covariance=covariance.tolist(), multiplier=t_quantile(len(names) - 1))
