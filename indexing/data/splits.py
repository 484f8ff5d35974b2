"""Class-disjoint train / validation / test splits, the deep-metric-learning way.

Rule (also in docs/data.md):

1. Train vs test. If the records carry a source split (``record.split`` is ``"train"`` or
   ``"test"``, as for CUB, Cars196, SOP, In-Shop or a CSV ``split`` column) it is followed.
   Otherwise classes are put in Python's case-sensitive ``sorted()`` order of their label
   strings (so upper-case names such as Caltech-101's ``Faces``, ``Leopards``, ``Motorbikes``
   come before lower-case ones) and the first ``floor(n / 2)`` classes train, the rest test.
   Case-insensitive or numeric orders would give other splits; we keep plain ``sorted()``
   because anyone can reproduce it in one line.
2. Validation is a class-disjoint part of the training classes, in the same class order.
   With ``val_fold=i`` the training classes are cut into ``num_folds`` contiguous folds
   (sizes differ by at most one, larger folds first) and fold ``i`` validates, as in the
   4-fold protocol of Musgrave et al., "A Metric Learning Reality Check". Otherwise the
   last ``max(2, round(val_fraction * n_train_classes))`` training classes validate;
   ``val_fraction=0`` gives no validation set.

Records inside each split are sorted by (label, path), so the result does not depend on
the order the records came in. A class with a single image is left out before step 1 (no other image can
retrieve it, so it can neither train a positive pair nor be a query; ``retrieval data check`` names it).

``every_class_split`` is the other choice (``data.split: none``): every record trains, nothing is
held out, so nothing is measured; for a model meant to search the same classes it was trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.class_check import single_image_classes
from retrieval.indexing.data.records import ImageRecord

MIN_VALIDATION_CLASSES = 5
"""Fewer validation classes than this cannot tell a trained epoch's gain from noise (the verdict, ``data check``)."""
MIN_VALIDATION_QUERIES = 100
"""Nor can fewer validation queries (images) than this."""
FEWER_ADVICE = "add classes, raise --val-fraction, or keep the backbone with --epochs 0"

SPLIT_NAMES = ("train", "val", "test", "all")
MIN_CLASSES = 2
SHOWN = 3


@dataclass(frozen=True)
class DatasetSplits:
    """Records and classes of each split; the three class lists are pairwise disjoint
    unless the source split itself reuses classes."""

    train: list[ImageRecord]
    val: list[ImageRecord]
    test: list[ImageRecord]
    train_classes: list[str]
    val_classes: list[str]
    test_classes: list[str]


def split_records(
    records: Sequence[ImageRecord], *, val_fraction: float = 0.2, val_fold: int | None = None, num_folds: int = 4
) -> DatasetSplits:
    """Split ``records`` by the rule in this module's docstring; DataError if a split is too small."""
    ordered = _retrievable(records)
    train_pool, test = _train_test(ordered)
    train_pool_classes = sorted({record.label for record in train_pool})
    val_classes = _validation_classes(train_pool_classes, val_fraction, val_fold, num_folds)
    val_set = set(val_classes)
    splits = DatasetSplits(
        train=[record for record in train_pool if record.label not in val_set],
        val=[record for record in train_pool if record.label in val_set],
        test=test,
        train_classes=[label for label in train_pool_classes if label not in val_set],
        val_classes=val_classes,
        test_classes=sorted({record.label for record in test}),
    )
    _check_sizes(splits, val_on=bool(val_classes) or val_fraction > 0 or val_fold is not None)
    return splits


def every_class_split(records: Sequence[ImageRecord]) -> DatasetSplits:
    """Every record in the training split (``data.split: none``): no validation, no test classes."""
    ordered = _retrievable(records)
    classes = sorted({record.label for record in ordered})
    if len(classes) < MIN_CLASSES:
        raise DataError(f"training needs at least {MIN_CLASSES} classes but the data has {len(classes)}")
    return DatasetSplits(train=ordered, val=[], test=[], train_classes=classes, val_classes=[], test_classes=[])


def select_split(
    records: Sequence[ImageRecord],
    name: str,
    *,
    val_fraction: float = 0.2,
    val_fold: int | None = None,
    num_folds: int = 4,
) -> list[ImageRecord]:
    """The records of one split by name: ``train``, ``val``, ``test`` or ``all``.

    ``test`` and ``all`` do not depend on the validation arguments, so they are computed
    without validation (a dataset too small for validation can still be evaluated).
    """
    if name not in SPLIT_NAMES:
        raise DataError(f"unknown split {name!r}; choose one of {', '.join(SPLIT_NAMES)}")
    if name == "all":
        return sorted(records, key=record_sort_key)
    if name == "test":
        return split_records(records, val_fraction=0.0).test
    splits = split_records(records, val_fraction=val_fraction, val_fold=val_fold, num_folds=num_folds)
    return splits.train if name == "train" else splits.val


def record_sort_key(record: ImageRecord) -> tuple[str, str, bool, bool]:
    return (record.label, str(record.path), record.is_query, record.is_gallery)


def _retrievable(records: Sequence[ImageRecord]) -> list[ImageRecord]:
    """``records`` sorted, without the classes of a single image (``class_check`` warns about them)."""
    single = set(single_image_classes(records))
    return sorted((record for record in records if record.label not in single), key=record_sort_key)


def _train_test(ordered: list[ImageRecord]) -> tuple[list[ImageRecord], list[ImageRecord]]:
    with_split = sum(record.split is not None for record in ordered)
    if with_split == 0:
        classes = sorted({record.label for record in ordered})
        train_classes = set(classes[: len(classes) // 2])
        train = [record for record in ordered if record.label in train_classes]
        return train, [record for record in ordered if record.label not in train_classes]
    if with_split != len(ordered):
        raise DataError(
            f"{with_split} of {len(ordered)} records have a source split and the others do not; "
            "give every record a split (train or test) or none"
        )
    unknown = sorted({str(record.split) for record in ordered if record.split is not None} - {"train", "test"})
    if unknown:
        raise DataError(f"unknown source split value(s) {', '.join(map(repr, unknown))}; use train or test")
    return [r for r in ordered if r.split == "train"], [r for r in ordered if r.split == "test"]


def _validation_classes(classes: list[str], val_fraction: float, val_fold: int | None, num_folds: int) -> list[str]:
    if val_fold is not None:
        return fold_classes(classes, val_fold, num_folds)
    if not 0.0 <= val_fraction < 1.0:
        raise DataError(f"val_fraction {val_fraction} must be in [0, 1)")
    if val_fraction == 0.0:
        return []
    count = max(MIN_CLASSES, round(val_fraction * len(classes)))
    return classes[len(classes) - count :] if count < len(classes) else list(classes)


def fold_classes(classes: list[str], fold: int, num_folds: int) -> list[str]:
    """Fold ``fold`` of ``classes`` cut into ``num_folds`` contiguous parts (like ``numpy.array_split``)."""
    if num_folds < 2:
        raise DataError(f"num_folds {num_folds} must be at least 2")
    if not 0 <= fold < num_folds:
        raise DataError(f"val_fold {fold} must be between 0 and {num_folds - 1} (num_folds={num_folds})")
    base, extra = divmod(len(classes), num_folds)
    start = fold * base + min(fold, extra)
    return classes[start : start + base + (1 if fold < extra else 0)]


def _check_sizes(splits: DatasetSplits, val_on: bool) -> None:
    counts = (len(splits.train_classes), len(splits.val_classes), len(splits.test_classes))
    needs = "; ".join(
        f"{what} needs at least {MIN_CLASSES} classes but has {count}"
        for what, count, required in zip(("training", "validation", "test"), counts, (True, val_on, True))
        if required and count < MIN_CLASSES
    )
    if needs:
        total = sum(counts)
        hint = " (lower --val-fraction, set it to 0, or add classes)" if val_on else " (add classes)"
        raise DataError(f"too few classes for a class-disjoint split of {total} classes: {needs}{hint}")
    _check_retrievable(splits.val, "validation")
    _check_retrievable(splits.test, "test")


def _check_retrievable(records: list[ImageRecord], split: str) -> None:
    """Every query must have at least one other gallery image of its class."""
    gallery: dict[str, int] = {}
    for record in records:
        gallery[record.label] = gallery.get(record.label, 0) + record.is_gallery
    short = sorted(
        {record.label for record in records if record.is_query and gallery[record.label] - record.is_gallery < 1}
    )
    if short:
        shown = ", ".join(repr(label) for label in short[:SHOWN]) + (" ..." if len(short) > SHOWN else "")
        raise DataError(
            f"{len(short)} class(es) in the {split} split have a query without another gallery image of the "
            f"same class ({shown}); retrieval needs at least 2 images per class: add images or remove the class"
        )
