"""The study's k class-disjoint folds of the training classes, as the Reality Check cuts them.

The training classes (the first half of the sorted classes, or the dataset's own train split) are
cut into k contiguous blocks in sorted order (``indexing.data.splits.fold_classes``, the rule of
``--val-fold``); fold i validates a model trained on the other k - 1 blocks. The test classes are
never part of any fold.
"""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.splits import MIN_CLASSES, DatasetSplits, fold_classes, split_records


def check_fold_count(num_training_classes: int, folds: int) -> None:
    """Every fold needs at least two validation classes (retrieval among one class measures nothing)."""
    if folds < 2:
        raise DataError(f"--folds {folds} must be at least 2 (the Reality Check uses 4)")
    needed = MIN_CLASSES * folds
    if num_training_classes < needed:
        raise DataError(
            f"--folds {folds} needs at least {needed} training classes ({MIN_CLASSES} per fold) but the data has "
            f"{num_training_classes}; lower --folds or add classes"
        )


def fold_validation_classes(training_classes: Sequence[str], folds: int) -> list[list[str]]:
    """The validation classes of each fold: contiguous blocks of the sorted training classes."""
    ordered = sorted(training_classes)
    check_fold_count(len(ordered), folds)
    return [fold_classes(ordered, fold, folds) for fold in range(folds)]


def fold_split(records: Sequence[ImageRecord], fold: int, folds: int) -> DatasetSplits:
    """Train / validation / test records of fold ``fold``: exactly what ``retrieval train --val-fold`` uses."""
    return split_records(records, val_fold=fold, num_folds=folds)
