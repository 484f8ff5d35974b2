"""``curves.png``: training loss and validation metrics per epoch, read from ``metrics.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from retrieval.indexing.common.atomic_write import atomic_write_with  # noqa: E402

_VAL_KEYS = (("map_at_r", "MAP@R"), ("r_precision", "R-precision"), ("precision_at_1", "P@1"))


def read_metrics_log(path: Path) -> list[dict]:
    """Rows of ``metrics.jsonl``; a line cut short by a crash mid-append is skipped, not fatal."""
    if not Path(path).is_file():
        return []
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def plot_curves(metrics_log: Path, out_png: Path, title: str = "") -> None:
    rows = read_metrics_log(metrics_log)
    figure, (loss_axes, val_axes) = plt.subplots(1, 2, figsize=(11, 4))
    trained = [r for r in rows if r.get("train_loss") is not None]
    loss_axes.plot([r["epoch"] for r in trained], [r["train_loss"] for r in trained], marker="o")
    loss_axes.set(xlabel="epoch", ylabel="mean training loss", title="training loss")
    evaluated = [r for r in rows if r.get("val")]
    for key, name in _VAL_KEYS:
        val_axes.plot([r["epoch"] for r in evaluated], [r["val"][key] for r in evaluated], marker="o", label=name)
    val_axes.set(xlabel="epoch (0 = untrained)", ylabel="validation", title="validation (class-disjoint)")
    val_axes.set_ylim(0, 1)
    val_axes.legend()
    for axes in (loss_axes, val_axes):
        axes.grid(alpha=0.3)
    figure.suptitle(title)
    figure.tight_layout()
    atomic_write_with(Path(out_png), lambda tmp: figure.savefig(tmp, format="png", dpi=100))
    plt.close(figure)
