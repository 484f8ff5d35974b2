"""The records a run trains and measures on, as its ``data`` section asks, torch-free: the per-class cap
(``data.max_images_per_class``), then the class-disjoint split (``data.split: classes``, with
``val_fraction`` / ``val_fold``) or every class (``none``).

``retrieval train`` splits with it before torch loads (``config_checks``), so a dataset too small to split
is refused in a second; the trainer splits with it again after its image scan (``data_pipeline.run_data``).
"""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.splits import DatasetSplits, every_class_split, split_records
from retrieval.indexing.data.subsample import cap_images_per_class
from retrieval.training.config.train_config import DataConfig


def capped_records(records: Sequence[ImageRecord], data: DataConfig) -> list[ImageRecord]:
    """``records`` with at most ``data.max_images_per_class`` images of each class (all of them when unset)."""
    cap = data.max_images_per_class
    return cap_images_per_class(records, cap) if cap is not None else list(records)


def run_split(records: Sequence[ImageRecord], data: DataConfig) -> DatasetSplits:
    """Class-disjoint train / validation / test (``data.split: classes``), or every class trains (``none``);
    DataError when the classes are too few for it."""
    if data.split == "none":
        return every_class_split(records)
    return split_records(records, val_fraction=data.val_fraction, val_fold=data.val_fold, num_folds=data.num_folds)
