"""The class-disjoint split rule, checked against hand-computed class lists."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.splits import every_class_split, select_split, split_records


def _records(labels: list[str], per_class: int = 3, split: dict[str, str] | None = None) -> list[ImageRecord]:
    return [
        ImageRecord(path=Path(f"/data/{label}/{i}.jpg"), label=label, split=(split or {}).get(label))
        for label in labels
        for i in range(per_class)
    ]


def _classes(count: int) -> list[str]:
    return [f"c{i:02d}" for i in range(count)]


def test_class_order_is_case_sensitive_sorted() -> None:
    labels = ["ant", "zebra", "Motorbikes", "airplanes", "bass", "Faces", "anchor", "Leopards"]
    splits = split_records(_records(labels), val_fraction=0.5)
    # sorted(): upper case first -> Faces, Leopards, Motorbikes, airplanes | anchor, ant, bass, zebra
    assert splits.train_classes == ["Faces", "Leopards"]
    assert splits.val_classes == ["Motorbikes", "airplanes"]
    assert splits.test_classes == ["anchor", "ant", "bass", "zebra"]


def test_odd_class_count_gives_the_extra_class_to_test() -> None:
    splits = split_records(_records(_classes(9)), val_fraction=0.0)
    assert splits.train_classes == _classes(4) and splits.test_classes == _classes(9)[4:]
    assert splits.val == [] and splits.val_classes == []


def test_split_is_deterministic_whatever_the_record_order() -> None:
    records = _records(_classes(20), per_class=4)
    reference = split_records(records)
    for seed in range(3):
        shuffled = records[:]
        random.Random(seed).shuffle(shuffled)
        assert split_records(shuffled) == reference


def test_records_follow_their_class_and_splits_are_disjoint() -> None:
    records = _records(_classes(20), per_class=4)
    splits = split_records(records)
    train, val, test = (set(s) for s in (splits.train_classes, splits.val_classes, splits.test_classes))
    assert not (train & val) and not (train & test) and not (val & test)
    assert train | val | test == set(_classes(20))
    for part, classes in ((splits.train, train), (splits.val, val), (splits.test, test)):
        assert {r.label for r in part} == classes
    assert sorted(map(str, (r.path for r in splits.train + splits.val + splits.test))) == sorted(
        str(r.path) for r in records
    )


def test_default_validation_is_the_last_fifth_of_training_classes() -> None:
    splits = split_records(_records(_classes(40)))  # 20 training classes -> round(0.2 * 20) = 4
    assert splits.val_classes == ["c16", "c17", "c18", "c19"]
    assert splits.train_classes == _classes(16)
    small = split_records(_records(_classes(20)), val_fraction=0.05)  # round(0.5) = 0 -> at least 2
    assert small.val_classes == ["c08", "c09"]


@pytest.mark.parametrize("num_folds", [2, 4, 3])
def test_fold_selection_matches_contiguous_array_split(num_folds: int) -> None:
    records = _records(_classes(20))  # 10 training classes
    train_half = _classes(10)
    expected_folds = [list(fold) for fold in np.array_split(np.array(train_half), num_folds)]
    for fold in range(num_folds):
        splits = split_records(records, val_fold=fold, num_folds=num_folds)
        assert splits.val_classes == expected_folds[fold]
        assert splits.train_classes == [c for c in train_half if c not in expected_folds[fold]]
        assert splits.test_classes == _classes(20)[10:]


def test_four_folds_of_ten_classes_by_hand() -> None:
    records = _records(_classes(20))
    folds = [split_records(records, val_fold=i).val_classes for i in range(4)]
    assert folds == [["c00", "c01", "c02"], ["c03", "c04", "c05"], ["c06", "c07"], ["c08", "c09"]]


@pytest.mark.parametrize(
    ("classes", "kwargs", "message"),
    [
        (3, {"val_fraction": 0.0}, "too few classes .* of 3 classes: training needs at least 2 classes but has 1"),
        (6, {}, "training needs at least 2 classes but has 1"),
        (8, {"val_fold": 0}, "validation needs at least 2 classes but has 1"),
        (2, {"val_fraction": 0.0}, "test needs at least 2 classes but has 1"),
    ],
)
def test_too_few_classes(classes: int, kwargs: dict, message: str) -> None:
    with pytest.raises(DataError, match=message):
        split_records(_records(_classes(classes)), **kwargs)


def test_bad_arguments() -> None:
    records = _records(_classes(20))
    with pytest.raises(DataError, match="val_fold 4 must be between 0 and 3"):
        split_records(records, val_fold=4)
    with pytest.raises(DataError, match="num_folds 1 must be at least 2"):
        split_records(records, val_fold=0, num_folds=1)
    with pytest.raises(DataError, match=r"val_fraction 1.0 must be in \[0, 1\)"):
        split_records(records, val_fraction=1.0)


def test_a_single_image_class_is_left_out_wherever_it_would_land() -> None:
    records = _records(_classes(8), per_class=2)
    for lonely in ("c00", "c06"):  # a training class, a test class: neither can retrieve or be retrieved
        kept = [r for r in records if not (r.label == lonely and r.path.name == "0.jpg")]
        splits = split_records(kept, val_fraction=0.0)
        assert lonely not in splits.train_classes + splits.test_classes
        assert len(splits.train) + len(splits.test) == 14 and len(splits.train_classes) == 3
        assert lonely not in every_class_split(kept).train_classes


def test_source_split_is_followed() -> None:
    labels = ["a", "b", "c", "d", "e"]
    source = {"a": "test", "b": "train", "c": "test", "d": "train", "e": "train"}
    splits = split_records(_records(labels, split=source), val_fraction=0.0)
    assert splits.train_classes == ["b", "d", "e"] and splits.test_classes == ["a", "c"]


def test_mixed_or_unknown_source_splits_are_errors() -> None:
    mixed = _records(["a", "b", "c", "d"], split={"a": "train", "b": "test"})
    with pytest.raises(DataError, match="6 of 12 records have a source split and the others do not"):
        split_records(mixed)
    odd = _records(["a", "b", "c", "d"], split=dict.fromkeys("abcd", "val"))
    with pytest.raises(DataError, match="unknown source split value"):
        split_records(odd)


def _inshop_like(gallery_per_item: int, queries: int = 1) -> list[ImageRecord]:
    records = _records(["t1", "t2"], split=dict.fromkeys(["t1", "t2"], "train"))
    for item in ("q1", "q2"):
        records += [
            ImageRecord(Path(f"/d/{item}/q{i}.jpg"), item, "test", is_query=True, is_gallery=False)
            for i in range(queries)
        ]
        records += [
            ImageRecord(Path(f"/d/{item}/g{i}.jpg"), item, "test", is_query=False, is_gallery=True)
            for i in range(gallery_per_item)
        ]
    return records


def test_query_gallery_protocol_needs_one_gallery_image_per_query_class() -> None:
    splits = split_records(_inshop_like(gallery_per_item=1), val_fraction=0.0)
    assert len(splits.test) == 4 and splits.test_classes == ["q1", "q2"]
    with pytest.raises(DataError, match=r"2 class\(es\) in the test split have a query without another gallery"):
        split_records(_inshop_like(gallery_per_item=0, queries=2), val_fraction=0.0)


def test_select_split_uses_the_same_rule() -> None:
    records = _records(_classes(20))
    splits = split_records(records)
    assert select_split(records, "train") == splits.train
    assert select_split(records, "val") == splits.val
    assert select_split(records, "test") == splits.test
    assert sorted(map(str, (r.path for r in select_split(records, "all")))) == sorted(str(r.path) for r in records)
    assert select_split(records, "val", val_fold=1) == split_records(records, val_fold=1).val
    with pytest.raises(DataError, match="unknown split 'dev'; choose one of train, val, test, all"):
        select_split(records, "dev")


def test_test_split_of_a_dataset_too_small_for_validation() -> None:
    records = _records(_classes(4))
    assert [r.label for r in select_split(records, "test")] == ["c02"] * 3 + ["c03"] * 3
    with pytest.raises(DataError, match="training needs at least 2 classes but has 0"):
        select_split(records, "train")  # both training classes would be needed to validate
