"""Everything the trainer needs from the dataset, prepared and checked before the first step."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.bad_images import scan_images
from retrieval.indexing.data.exclusion import drop_excluded, read_exclude_list
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import DatasetSplits
from retrieval.training.config.run_split import capped_records, run_split
from retrieval.training.config.train_config import DataConfig
from retrieval.training.data_pipeline.class_grouping import group_classes
from retrieval.training.data_pipeline.image_dataset import label_index

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunData:
    splits: DatasetSplits
    train_label_index: dict[str, int]  # training classes -> 0..C-1, or their meta-class (data.meta_classes)
    eval_label_index: dict[str, int]  # every class -> an int, for metrics on val/test
    excluded: list[Path] = field(default_factory=list)  # left out by data.exclude

    @property
    def num_train_labels(self) -> int:
        """Outputs the loss needs (classes, or DREML meta-classes; proxy/softmax heads)."""
        return len(set(self.train_label_index.values()))


def prepare_run_data(cfg: DataConfig, *, progress: bool, grouping_seed: int = 0) -> RunData:
    """Load, scan and split the data; ``grouping_seed`` draws the DREML grouping when ``cfg.meta_classes`` is set."""
    if cfg.path is None:
        raise ConfigError("no dataset given: pass --data PATH (an ImageFolder directory, a CSV or a dataset root)")
    records, excluded = _exclude(load_records(cfg.path), cfg.exclude)
    records = _drop_bad_images(capped_records(records, cfg), cfg.on_bad_image, progress)
    splits = run_split(records, cfg)
    train_index = label_index(splits.train)
    if cfg.meta_classes is not None:
        train_index = group_classes(train_index, cfg.meta_classes, grouping_seed)
        log.info(
            "DREML: %d training classes grouped into %d meta-classes (seed %d)",
            len(train_index),
            cfg.meta_classes,
            grouping_seed,
        )
    return RunData(splits, train_index, label_index(records), excluded)


def _exclude(records: list[ImageRecord], exclude: Path | None) -> tuple[list[ImageRecord], list[Path]]:
    """The records not listed in ``exclude`` (``--exclude FILE``), and those left out, logged."""
    if exclude is None:
        return records, []
    listed = read_exclude_list(exclude)
    kept, excluded = drop_excluded(records, listed)
    log.info("left out %d of %d images listed in %s", len(excluded), len(records), exclude)
    if len(excluded) < len(listed):
        log.warning("%d paths of %s are not in the data", len(listed) - len(excluded), exclude)
    return kept, excluded


def _drop_bad_images(records: list[ImageRecord], policy: str, progress: bool) -> list[ImageRecord]:
    """``records`` without the unreadable images (or DataError, ``policy`` "fail") and the ones too small to see."""
    report = scan_images(records, progress=progress)
    if report.small:
        _warn_once(f"{report.small_sentence()}: e.g. {report.small[0][0]}")
    if not report.ok and policy == "fail":
        raise DataError(f"{report.summary(limit=50)}\n(use --on-bad-image skip to leave them out)")
    if not report.ok:
        _warn_once(f"skipping unreadable images: {report.summary(limit=50)}")
    left_out = report.bad_paths | report.small_paths
    return [r for r in records if r.path not in left_out] if left_out else records


@functools.cache
def _warn_once(message: str) -> None:
    """Log ``message`` the first time only: a final fit prepares the same data a second time."""
    log.warning(message)
