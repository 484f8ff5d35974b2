"""Mean and 95 % confidence interval over runs, as the Reality Check reports them (Tables 4-6)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats

CONFIDENCE = 0.95


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float | None]:
    """(mean, half-width of the Student-t interval), half-width None for a single run.

    Half-width = t_{(1 + confidence) / 2, n - 1} * s / sqrt(n), with s the sample standard deviation.
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, None
    variance = math.fsum((value - mean) ** 2 for value in values) / (n - 1)
    quantile = float(stats.t.ppf((1.0 + confidence) / 2.0, n - 1))
    return mean, quantile * math.sqrt(variance / n)
