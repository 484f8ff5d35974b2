"""``retrieval data duplicates``: planted exact and near copies found, classed and written as brute force says."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest
from duplicates_fixtures import EXACT_PLANTS, NEAR_PLANTS, brute_force_pairs, planted_gallery, planted_threshold
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.exclusion import read_exclude_list
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.usecases import SplitSettings, find_dataset_duplicates, find_exact_copies
from retrieval.training.usecases import data_duplicates


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_gallery(tmp_path_factory.mktemp("planted") / "data")


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_pairs_kinds_classes_and_splits_match_brute_force(planted: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    threshold = planted_threshold(tiny_model_dir, planted)
    copies = data_duplicates(
        planted,
        tmp_path / "out",
        model=tiny_model_dir,
        threshold=threshold,
        exclude_list=tmp_path / "ex.txt",
        split=SplitSettings(val_fraction=0.0),  # 6 classes: 3 train, 3 test
    )
    rows = read_csv(tmp_path / "out" / "duplicates.csv")
    found = {(row["path_a"], row["path_b"]): row for row in rows}
    exact = {tuple(sorted((str(planted / a), str(planted / b)))) for a, b in EXACT_PLANTS.items()}
    expected = brute_force_pairs(tiny_model_dir, planted, threshold)
    # k-NN is bounded at 10 neighbours: at most that many are missed per item, none of the planted ones
    assert set(found) <= set(expected) | exact
    assert exact | {tuple(sorted((str(planted / a), str(planted / b)))) for a, b in NEAR_PLANTS.items()} <= set(found)
    split = {
        str(r.path): name
        for name in ("train", "val", "test")
        for r in getattr(split_records(load_records(planted), val_fraction=0.0), name)
    }
    for (a, b), row in found.items():
        assert row["kind"] == ("exact" if (a, b) in exact else "near")
        assert float(row["score"]) == pytest.approx(1.0 if (a, b) in exact else expected[(a, b)], abs=1e-4)
        assert (row["class_a"], row["class_b"]) == (Path(a).parent.name, Path(b).parent.name)
        assert (row["split_a"], row["split_b"]) == (split[a], split[b])
    exact_counts = copies.counts("exact")
    assert (exact_counts.within_class, exact_counts.across_classes, exact_counts.across_split) == (1, 1, 1)
    assert (tmp_path / "out" / "duplicates.png").stat().st_size > 0
    left_out = (tmp_path / "ex.txt").read_text().splitlines()
    assert str(planted / "class_4/copy_exact.bmp") in left_out  # the test-split member of a train/test pair
    assert str(planted / "class_1/img_1.png") not in left_out
    assert len(left_out) == len(copies.excluded())


def test_exact_copies_alone_need_no_model(planted: Path) -> None:
    copies = find_exact_copies(planted, split=SplitSettings(val_fraction=0.0), progress=False)
    assert {(copies.records[p.a].path.name, copies.records[p.b].path.name) for p in copies.pairs} == {
        ("copy_exact.png", "img_0.png"),
        ("img_1.png", "copy_exact.bmp"),
    }
    assert (
        "exact copy pairs (the same pixels): 1 within a class, 1 across classes (possible label noise), 1 across"
        in (copies.summary())
    )


def test_bad_input_gets_one_sentence(tmp_path: Path, planted: Path, tiny_model_dir: Path) -> None:
    (tmp_path / "one" / "a").mkdir(parents=True)
    (tmp_path / "one" / "a" / "x.png").write_bytes((planted / "class_0" / "img_0.png").read_bytes())
    with pytest.raises(DataError, match="two images or more"):
        find_dataset_duplicates(tiny_model_dir, tmp_path / "one", threshold=0.9, progress=False)
    with pytest.raises(ConfigError, match=r"--threshold must be a cosine similarity in \[-1, 1\], got 1.5"):
        find_dataset_duplicates(tiny_model_dir, planted, threshold=1.5, progress=False)
    with pytest.raises(ConfigError, match="no measured copy threshold"):
        find_dataset_duplicates(tiny_model_dir, planted, progress=False)


def test_an_unreadable_image_is_skipped_and_named(tmp_path: Path, tiny_model_dir: Path) -> None:
    data = planted_gallery(tmp_path / "data")
    (data / "class_2" / "broken.png").write_bytes(b"not a png")
    copies = find_dataset_duplicates(tiny_model_dir, data, threshold=0.999, progress=False)
    assert [path.name for path, _ in copies.unreadable] == ["broken.png"]


def test_cli_prints_counts_and_refuses_a_bad_threshold(planted: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    args = ["data", "duplicates", str(planted), "--out", str(tmp_path / "o"), "--model", str(tiny_model_dir)]
    result = CliRunner().invoke(app, [*args, "--threshold", "0.999", "--quiet", "--val-fraction", "0"])
    assert result.exit_code == 0, result.output
    assert "exact copy pairs (the same pixels): 1 within a class, 1 across classes" in result.output
    bad = CliRunner().invoke(app, [*args, "--threshold", "2"])
    assert isinstance(bad.exception, ConfigError)  # main() prints a RetrievalError as its one sentence
    assert str(bad.exception) == "--threshold must be a cosine similarity in [-1, 1], got 2"


@pytest.mark.slow
def test_the_default_model_on_six_classes_skips_a_corrupt_image_and_writes_a_non_utf8_name(tmp_path: Path) -> None:
    data = planted_gallery(tmp_path / "data")  # 6 classes: too few for the default class-disjoint split
    (data / "class_2" / "bad.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    odd = os.fsencode(data / "class_0") + b"/z\xe9.png"  # a Latin-1 name, not UTF-8: an exact copy of img_0
    shutil.copyfile(data / "class_0" / "img_0.png", odd)
    out, listed = tmp_path / "out", tmp_path / "ex.txt"
    args = ["data", "duplicates", str(data), "--out", str(out), "--quiet", "--exclude-list", str(listed)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output  # was: the corrupt image stopped it, then a UnicodeEncodeError
    assert f"warning: skipped {data / 'class_2' / 'bad.jpg'}" in result.output
    assert ModelManifest.load(out / "model").duplicates is not None  # measured on the 6 classes' images
    assert "threshold: --threshold" not in result.output and "(exact copies only)" not in result.output
    rows = list(csv.DictReader((out / "duplicates.csv").read_bytes().decode("utf-8", "surrogateescape").splitlines()))
    exact = {frozenset((row["path_a"], row["path_b"])) for row in rows if row["kind"] == "exact"}
    assert frozenset((str(data / "class_0" / "img_0.png"), os.fsdecode(odd))) in exact  # the file's own bytes
    left_out = read_exclude_list(listed)  # each group keeps its first path: copy_exact.png, class_1/img_1.png
    assert {data / "class_0" / "img_0.png", Path(os.fsdecode(odd)), data / "class_4" / "copy_exact.bmp"} <= left_out
