"""The study's tables and plot, laid out like the Reality Check's Tables 4-6.

One row per loss (plus the pretrained reference): P@1, R-precision and MAP@R of the test classes,
"concatenated" (the k fold models joined) and "separated" (each fold model alone, averaged), as
percentages, mean +- 95 % confidence interval over the final runs (one run per seed). ``study.md``
has a float table and a binary (sign bits) table, the search summary and the wall time;
``study.csv`` one line per (loss, mode, kind, metric); ``study.png`` MAP@R with its interval.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt  # noqa: E402

from retrieval.indexing.common.atomic_write import atomic_write_text, atomic_write_with
from retrieval.training.study.backends.study_evaluation import KINDS
from retrieval.training.study.reporting.stats import mean_ci

MODES = ("concatenated", "separated")
METRICS = (("precision_at_1", "P@1"), ("r_precision", "RP"), ("map_at_r", "MAP@R"))


@dataclass(frozen=True)
class Cell:
    """A metric as a fraction: the mean over ``runs`` runs and the 95 % half-width (None: one run)."""

    mean: float
    ci: float | None
    runs: int

    def text(self) -> str:
        if self.runs == 0:  # the reference: one deterministic value, no interval to give
            return f"{100 * self.mean:.2f}"
        interval = "n/a" if self.ci is None else f"{100 * self.ci:.2f}"
        return f"{100 * self.mean:.2f} ± {interval}"


Row = tuple[str, dict[tuple[str, str, str], Cell]]  # (name, {(mode, kind, metric): cell})


def loss_row(name: str, runs: Sequence[dict[str, Any]]) -> Row:
    """Mean and interval over the final runs (``evaluation.run_metrics`` results) of one loss."""
    cells = {}
    for mode in MODES:
        for kind in KINDS:
            for metric, _ in METRICS:
                mean, ci = mean_ci([run[mode][kind][metric] for run in runs])
                cells[(mode, kind, metric)] = Cell(mean, ci, len(runs))
    return name, cells


def reference_row(name: str, reference: dict[str, Any]) -> Row:
    cells = {
        (mode, kind, metric): Cell(reference[mode][kind][metric], None, 0)
        for mode in MODES
        for kind in KINDS
        for metric, _ in METRICS
    }
    return name, cells


def write_csv(path: Path, rows: Sequence[Row]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["loss", "mode", "kind", "metric", "mean", "ci95", "runs"])
    for name, cells in rows:
        for (mode, kind, metric), cell in cells.items():
            ci = "" if cell.ci is None else f"{cell.ci:.6f}"
            writer.writerow([name, mode, kind, metric, f"{cell.mean:.6f}", ci, cell.runs or ""])
    atomic_write_text(path, buffer.getvalue())


def markdown_table(rows: Sequence[Row], kind: str, dims: dict[str, str]) -> list[str]:
    """The Reality Check layout: Concatenated P@1 RP MAP@R | Separated P@1 RP MAP@R."""
    header = ["loss"] + [f"{mode.capitalize()} ({dims[mode]}) {label}" for mode in MODES for _, label in METRICS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, cells in rows:
        values = [cells[(mode, kind, metric)].text() for mode in MODES for metric, _ in METRICS]
        lines.append("| " + " | ".join([name, *values]) + " |")
    return lines


def write_markdown(path: Path, sections: Sequence[str]) -> None:
    atomic_write_text(path, "\n\n".join(section.rstrip() for section in sections) + "\n")


def write_plot(path: Path, rows: Sequence[Row], title: str) -> None:
    """MAP@R per loss with its 95 % interval; concatenated and separated side by side, float and binary."""
    names = [name for name, _ in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.45 * len(rows)), sharey=True)
    for axis, mode in zip(axes, MODES):
        for offset, kind, marker in ((-0.12, "float", "o"), (0.12, "binary", "s")):
            points = [cells[(mode, kind, "map_at_r")] for _, cells in rows]
            axis.errorbar(
                [100 * point.mean for point in points],
                [i + offset for i in range(len(rows))],
                xerr=[100 * (point.ci or 0.0) for point in points],
                fmt=marker,
                capsize=3,
                fillstyle="full" if kind == "float" else "none",
                label=kind,
            )
        axis.set_title(mode)
        axis.set_xlabel("test MAP@R (%)")
        axis.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(rows)), names)
    axes[0].invert_yaxis()
    axes[1].legend(loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_write_with(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    plt.close(fig)
