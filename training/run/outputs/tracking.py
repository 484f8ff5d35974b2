"""Experiment tracking: TensorBoard event files in ``RUN_DIR/tensorboard``, beside ``metrics.jsonl``.

Written when ``trainer.tensorboard`` is on (``retrieval train --tensorboard``), by the main process
only. TensorBoard's format is the de-facto one: MLflow, Weights & Biases and others import it. The
step axis is the optimizer step (``global_step``, as in ``metrics.jsonl``) for every tag, so
per-step and per-epoch curves line up; ``epoch`` is a scalar of its own. Tags:

- ``train/loss`` (every step), ``lr/<group>`` (every step: backbone, head, loss; the rate in
  effect after that step, as ``metrics.jsonl``'s ``lr``);
- per epoch, the values of the ``metrics.jsonl`` row: ``train/epoch_loss``, ``train/images_per_second``,
  ``train/data_wait_fraction`` and ``val/<metric>`` (``val/recall_at_<k>`` for each Recall@K);
- ``val/retrieval_grid`` and ``test/retrieval_grid``: the retrieval grid of ``retrieval eval``
  (``indexing.eval.retrieval_grid``) for a few validation queries at every validation, and for test
  queries with the best weights at the end.

A resumed run drops the events an interrupted run wrote after its last checkpoint (``purge_step``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.eval.evaluation import EvalData, exact_neighbors, grid_queries, grid_rows
from retrieval.indexing.eval.retrieval_grid import render_grid
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset

TENSORBOARD_DIR = "tensorboard"
GRID_QUERIES = 6
GRID_NEIGHBORS = 8


class Tracker:
    """Tracking switched off: every call does nothing (non-main processes, runs without tracking)."""

    def log_step(self, step: int, loss: float, param_groups: Sequence[dict[str, Any]]) -> None:
        """One optimizer step: its loss and the learning rates now in effect."""

    def log_epoch(self, row: dict[str, Any]) -> None:
        """One ``metrics.jsonl`` row (epoch 0 is the untrained validation)."""

    def log_retrieval_grid(self, split: str, dataset: ImageRecordDataset, embeddings: np.ndarray, step: int) -> None:
        """The retrieval grid of a few queries of an embedded split (its unreadable images left out)."""

    def close(self) -> None:
        """Flush and close the event files."""


class TensorBoardTracker(Tracker):
    """Writes the tags of the module docstring; the event file is opened at the first event."""

    def __init__(self, log_dir: Path, *, resume: bool) -> None:
        self._writer_class = _summary_writer_class()
        self.log_dir, self._resume = Path(log_dir), resume
        self._writer: Any = None

    def _at(self, step: int) -> Any:
        if self._writer is None:  # a resumed run discards what an interrupted run logged from here on
            self._writer = self._writer_class(str(self.log_dir), purge_step=step if self._resume else None)
        return self._writer

    def log_step(self, step: int, loss: float, param_groups: Sequence[dict[str, Any]]) -> None:
        writer = self._at(step)
        writer.add_scalar("train/loss", loss, step)
        for number, group in enumerate(param_groups):
            writer.add_scalar(f"lr/{group.get('name', number)}", group["lr"], step)

    def log_epoch(self, row: dict[str, Any]) -> None:
        step = int(row["global_step"])
        writer = self._at(step)
        writer.add_scalar("epoch", row["epoch"], step)
        for key, tag in (("train_loss", "epoch_loss"), ("images_per_second", None), ("data_wait_fraction", None)):
            if row.get(key) is not None:
                writer.add_scalar(f"train/{tag or key}", row[key], step)
        for name, value in validation_scalars(row.get("val")).items():
            writer.add_scalar(f"val/{name}", value, step)
        writer.flush()  # an interrupted run keeps every finished epoch

    def log_retrieval_grid(self, split: str, dataset: ImageRecordDataset, embeddings: np.ndarray, step: int) -> None:
        keep = ~dataset.bad_mask()
        records = [record for record, ok in zip(dataset.records, keep) if ok]
        data = EvalData.from_records(records, embeddings[keep])
        queries = grid_queries(data, GRID_QUERIES)
        if len(queries) == 0 or not data.is_gallery.any():
            return
        image = render_grid(grid_rows(data, queries, exact_neighbors(data, queries, GRID_NEIGHBORS)))
        self._at(step).add_image(f"{split}/retrieval_grid", np.asarray(image), step, dataformats="HWC")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def validation_scalars(val: dict[str, Any] | None) -> dict[str, float]:
    """The numbers of a validation metrics dict, Recall@K flattened to ``recall_at_<k>``."""
    scalars: dict[str, float] = {}
    for key, value in (val or {}).items():
        if key == "recall_at_k":
            scalars.update({f"recall_at_{k}": float(v) for k, v in value.items()})
        elif isinstance(value, int | float) and not isinstance(value, bool):
            scalars[key] = float(value)
    return scalars


def open_tracker(run_dir: Path, *, enabled: bool, main_process: bool, resume: bool) -> Tracker:
    """The run's tracker: TensorBoard in ``run_dir/tensorboard`` when enabled, on the main process."""
    if not (enabled and main_process):
        return Tracker()
    return TensorBoardTracker(Path(run_dir) / TENSORBOARD_DIR, resume=resume)


def _summary_writer_class() -> Any:
    """torch's SummaryWriter, or one sentence saying what to install (checked before any data is read)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError(
            "trainer.tensorboard (--tensorboard) needs the tensorboard package: pip install 'retrieval[tracking]'"
        ) from None
    return SummaryWriter
