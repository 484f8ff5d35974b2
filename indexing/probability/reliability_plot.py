"""``calibration.png``: the reliability diagram of each score kind (same-class fraction against the mean
probability per bin, the diagonal where they agree) with its ECE, and the hits per bin below."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from matplotlib.figure import Figure

from retrieval.indexing.common.atomic_write import atomic_write_with
from retrieval.indexing.common.score_calibration import CalibrationKind
from retrieval.indexing.probability.reliability import BINS, CalibrationReport

CALIBRATION_PLOT_NAME = "calibration.png"


def save_reliability_plot(reports: Mapping[CalibrationKind, CalibrationReport], path: Path) -> Path:
    """Write the diagram of ``reports`` (a column per kind) to ``path`` atomically."""
    figure = Figure(figsize=(4.2 * len(reports), 6))
    axes = figure.subplots(2, len(reports), squeeze=False, gridspec_kw={"height_ratios": [3, 1]})
    for column, (kind, report) in enumerate(reports.items()):
        top, bottom = axes[0][column], axes[1][column]
        top.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
        top.plot([b.mean_probability for b in report.bins], [b.same_class for b in report.bins], marker="o")
        top.set(xlim=(0, 1), ylim=(0, 1), title=f"{kind}: ECE {report.ece:.3f}", ylabel="same class (realised)")
        centres = [(b.low + b.high) / 2 for b in report.bins]
        bottom.bar(centres, [b.hits for b in report.bins], width=1 / BINS, edgecolor="white")
        bottom.set(xlim=(0, 1), xlabel="probability (calibrated)", ylabel="hits")
    figure.tight_layout()
    atomic_write_with(path, lambda target: figure.savefig(target, format="png", dpi=100))
    return path
