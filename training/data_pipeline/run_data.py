"""Everything the trainer needs from the dataset, prepared and checked before the first step."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.bad_images import scan_images
from retrieval.indexing.data.exclusion import drop_excluded, read_exclude_list
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import DatasetSplits
from retrieval.indexing.duplicates.pixel_hash import exact_copy_sets, pixel_digests
from retrieval.indexing.exported_model.training_verdict import DataCopies
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
    copies: DataCopies | None = None  # exact copies among the images, as `retrieval data check` counts them

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
    return RunData(splits, train_index, label_index(records), excluded, exact_copies(splits, progress=progress))


def exact_copies(splits: DatasetSplits, *, progress: bool) -> DataCopies:
    """The pairs of the run's images with the same decoded pixels: within a class, across classes, and across
    the run's split (in two of training, validation and test), as ``retrieval data check`` counts them;
    the verdict repeats them (``training.run.measures.verdict``)."""
    named = [(record, part) for part in ("train", "val", "test") for record in getattr(splits, part)]
    digests = _pixel_digests([record.path for record, _ in named], progress)
    within = across = leaks = 0
    for members in exact_copy_sets(digests):
        for a, b in combinations(members, 2):
            (first, split_a), (second, split_b) = named[a], named[b]
            within, across = (within + 1, across) if first.label == second.label else (within, across + 1)
            leaks += split_a != split_b
    return DataCopies(within_class=within, across_classes=across, across_split=leaks)


_DIGESTS: dict[tuple[str, int, int], str | None] = {}


def _pixel_digests(paths: list[Path], progress: bool) -> list[str | None]:
    """Each image decoded once per process (a final fit prepares the same images again), by path, size and time."""
    keys = []
    for path in paths:
        stat = path.stat()
        keys.append((str(path), stat.st_mtime_ns, stat.st_size))
    missing = [path for path, key in zip(paths, keys, strict=True) if key not in _DIGESTS]
    if missing:
        fresh = dict(zip(missing, pixel_digests(missing, progress=progress), strict=True))
        _DIGESTS.update({key: fresh[path] for path, key in zip(paths, keys, strict=True) if path in fresh})
    return [_DIGESTS[key] for key in keys]


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
