"""``curves.png``: training loss and validation metrics per epoch, read from ``metrics.jsonl``.

The epoch the trainer selected (its best checkpoint) is marked on both panels, and epochs are
whole numbers on the axis, however few there are.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from retrieval.indexing.common.atomic_write import atomic_write_with  # noqa: E402

_VAL_KEYS = (("map_at_r", "MAP@R"), ("r_precision", "R-precision"), ("precision_at_1", "P@1"))
BEST_COLOUR = "tab:red"


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


def curves_figure(
    rows: list[dict], title: str = "", best_epoch: int | None = None, reference: str = "untrained"
) -> Figure:
    """Loss (left) and validation metrics (right) per epoch; ``best_epoch`` (>= 1) is marked on both; epoch 0 is
    the ``reference`` ("pretrained" or "untrained") backbone."""
    figure, (loss_axes, val_axes) = plt.subplots(1, 2, figsize=(11, 4))
    trained = [r for r in rows if r.get("train_loss") is not None]
    loss_axes.plot([r["epoch"] for r in trained], [r["train_loss"] for r in trained], marker="o", label="loss")
    loss_axes.set(xlabel="epoch", ylabel="mean training loss", title="training loss")
    evaluated = [r for r in rows if r.get("val")]
    for key, name in _VAL_KEYS:
        val_axes.plot([r["epoch"] for r in evaluated], [r["val"][key] for r in evaluated], marker="o", label=name)
    val_axes.set(
        xlabel=f"epoch (0 = the {reference} backbone)", ylabel="validation", title="validation (class-disjoint)"
    )
    val_axes.set_ylim(0, 1)
    if best_epoch and any(r["epoch"] == best_epoch for r in rows):
        _mark_best(
            loss_axes, val_axes, best_epoch, next((r["val"] for r in evaluated if r["epoch"] == best_epoch), None)
        )
    for axes in (loss_axes, val_axes):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        axes.grid(alpha=0.3)
        axes.legend(loc="best", fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def _mark_best(loss_axes: Axes, val_axes: Axes, epoch: int, val: dict | None) -> None:
    label = f"best epoch {epoch}" + (f" (MAP@R {val['map_at_r']:.3f})" if val else "")
    for axes in (loss_axes, val_axes):
        axes.axvline(epoch, color=BEST_COLOUR, linestyle="--", linewidth=1.2, label=label)
    if val:
        val_axes.plot([epoch], [val["map_at_r"]], marker="*", markersize=14, color=BEST_COLOUR, linestyle="none")


def plot_curves(
    metrics_log: Path, out_png: Path, title: str = "", best_epoch: int | None = None, reference: str = "untrained"
) -> None:
    """Write ``curves.png`` atomically from the rows of ``metrics_log``."""
    figure = curves_figure(read_metrics_log(metrics_log), title, best_epoch, reference)
    atomic_write_with(Path(out_png), lambda tmp: figure.savefig(tmp, format="png", dpi=100))
    plt.close(figure)
