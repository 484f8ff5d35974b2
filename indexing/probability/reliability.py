"""How well probabilities hold where they were not fitted: the expected calibration error (ECE) over hits and,
at requested cut-offs, the precision realised and the share of same-class hits kept.

ECE: the hits' probabilities in ``BINS`` equal bins of [0, 1]; per bin the gap between the mean probability and
the fraction of same-class hits, averaged with the bins' hit counts as weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

BINS = 15
CUTOFFS = (0.5, 0.8, 0.9)


@dataclass(frozen=True)
class CutoffResult:
    """``min_probability = cutoff``: the fraction of hits kept that share the query's class (None: none kept)
    and the fraction of the same-class hits that are kept."""

    cutoff: float
    precision: float | None
    recall_kept: float
    hits_kept: int


@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    hits: int
    mean_probability: float
    same_class: float


@dataclass(frozen=True)
class CalibrationReport:
    """One score kind's calibration on evaluated hits."""

    ece: float
    hits: int
    base_rate: float
    bins: list[ReliabilityBin]
    cutoffs: list[CutoffResult]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def reliability_bins(probabilities: np.ndarray, same: np.ndarray, bins: int = BINS) -> list[ReliabilityBin]:
    """The non-empty bins of ``bins`` equal-width bins of [0, 1] (the last one closed)."""
    p, y = np.asarray(probabilities, np.float64), np.asarray(same, np.float64)
    index = np.minimum((p * bins).astype(np.int64), bins - 1)
    counts = np.bincount(index, minlength=bins)
    sums = np.bincount(index, weights=p, minlength=bins)
    positives = np.bincount(index, weights=y, minlength=bins)
    return [
        ReliabilityBin(b / bins, (b + 1) / bins, int(counts[b]), sums[b] / counts[b], positives[b] / counts[b])
        for b in range(bins)
        if counts[b]
    ]


def expected_calibration_error(probabilities: np.ndarray, same: np.ndarray, bins: int = BINS) -> float:
    """Sum over bins of (hits in bin / hits) * |mean probability - same-class fraction|."""
    total = len(probabilities)
    if not total:
        return 0.0
    return float(
        sum(
            b.hits / total * abs(b.mean_probability - b.same_class) for b in reliability_bins(probabilities, same, bins)
        )
    )


def at_cutoff(probabilities: np.ndarray, same: np.ndarray, cutoff: float) -> CutoffResult:
    kept = np.asarray(probabilities) >= cutoff
    same = np.asarray(same, bool)
    precision = float(same[kept].mean()) if kept.any() else None
    recall = float((same & kept).sum() / same.sum()) if same.any() else 0.0
    return CutoffResult(cutoff, precision, recall, int(kept.sum()))


def calibration_report(
    probabilities: np.ndarray, same: np.ndarray, base_rate: float, cutoffs: tuple[float, ...] = CUTOFFS
) -> CalibrationReport:
    return CalibrationReport(
        ece=expected_calibration_error(probabilities, same),
        hits=len(probabilities),
        base_rate=base_rate,
        bins=reliability_bins(probabilities, same),
        cutoffs=[at_cutoff(probabilities, same, cutoff) for cutoff in cutoffs],
    )
