"""Small-data problems caught before training: a folder without images, images outside class folders, empty
class folders, single-image classes, images too small for the backbones, and a split too small to choose on;
each is one sentence with its fix, from ``retrieval data check`` and, before torch loads, ``retrieval train``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.bad_images import MIN_IMAGE_SIDE, scan_images
from retrieval.indexing.data.class_check import class_problems
from retrieval.indexing.data.sources import detect_layout, load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.training.config.config_checks import check_config
from retrieval.training.config.train_config import DataConfig, build_config
from retrieval.training.data_pipeline.run_data import prepare_run_data

runner = CliRunner()


def _image(path: Path, side: int = 64) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (side, side), (200, 30, 30)).save(path)


def _small_dataset(root: Path) -> Path:
    """11 classes of 4 images, one class of 1 image, one empty class folder, one 1x1 image."""
    for label in "abcdefghijk":
        for number in range(4):
            _image(root / label / f"{number}.png")
    _image(root / "aa_lonely" / "0.png")
    (root / "empty").mkdir()
    _image(root / "a" / "tiny.png", side=1)
    return root


def test_a_folder_without_images_says_so(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("no images here")
    with pytest.raises(DataError, match=f"^no images found in {tmp_path} "):
        detect_layout(tmp_path)


def test_images_outside_class_folders_say_where_they_should_go(tmp_path: Path) -> None:
    _image(tmp_path / "0.png")
    with pytest.raises(DataError, match="sit directly in it, with no class folders; move each class's images"):
        detect_layout(tmp_path)


def test_empty_class_folders_and_single_image_classes_are_named_with_the_fix(tmp_path: Path) -> None:
    root = _small_dataset(tmp_path / "data")
    empty, single = class_problems(root, load_records(root), layout="ImageFolder")
    assert empty == f"1 class folder in {root} holds no image (empty): it is ignored; add images or remove it"
    assert single.startswith(f"1 class of {root} has a single image (aa_lonely): no other image can retrieve it")
    assert class_problems(root, load_records(root), layout="CSV manifest")[1:] == []  # folders are classes only here


def test_images_below_the_backbones_minimum_are_listed(tmp_path: Path) -> None:
    root = _small_dataset(tmp_path / "data")
    report = scan_images(load_records(root), progress=False)
    assert report.ok and report.small == [(root / "a" / "tiny.png", (1, 1))]
    assert f"1 of 46 images are smaller than {MIN_IMAGE_SIDE} px on a side" in report.summary()


def test_data_check_prints_each_problem_and_what_the_split_leaves(tmp_path: Path) -> None:
    root = _small_dataset(tmp_path / "data")
    result = runner.invoke(app, ["data", "check", str(root), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "warning: 1 class folder in" in result.output and "warning: 1 class of" in result.output
    assert "smaller than 32 px on a side" in result.output and "tiny.png: 1x1" in result.output
    assert "  val " in result.output and "  test " in result.output
    assert "2 validation classes (8 images) choose the epoch, fewer than the 5 classes and 100 queries" in result.output


def test_train_warns_about_the_classes_before_torch(tmp_path: Path) -> None:
    root = _small_dataset(tmp_path / "data")
    warnings = check_config(build_config([("test", {"data": {"path": str(root)}})]))
    assert any("holds no image (empty)" in text for text in warnings)
    assert any("has a single image (aa_lonely)" in text for text in warnings)


def _lonely_validation_class(root: Path) -> tuple[Path, str]:
    """A generated ImageFolder of 12 classes x 4 images whose last validation class keeps a single image."""
    generate_synthetic_dataset(root, classes=12, per_class=4, size=32, seed=0, progress=False)
    lonely = split_records(load_records(root)).val_classes[-1]
    for extra in sorted((root / lonely).glob("*.png"))[1:]:
        extra.unlink()
    return root, lonely


def test_a_single_image_class_is_left_out_as_data_check_says_and_training_runs(tmp_path: Path) -> None:
    root, lonely = _lonely_validation_class(tmp_path / "data")
    result = runner.invoke(app, ["data", "check", str(root), "--quiet"])
    assert f"has a single image ({lonely}): no other image can retrieve it, so the split leaves it out" in (
        result.output
    )
    assert "no class-disjoint split" not in result.output and "  val " in result.output
    splits = prepare_run_data(DataConfig(path=root), progress=False).splits  # what the trainer splits
    kept = {record.label for record in splits.train + splits.val + splits.test}
    assert lonely not in kept and len(kept) == 11
    every = prepare_run_data(DataConfig(path=root, split="none"), progress=False).splits
    assert lonely not in every.train_classes and len(every.train) == 44


def test_a_one_pixel_image_is_left_out_of_training_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = _small_dataset(tmp_path / "data")
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # a final fit prepares the data twice
            splits = prepare_run_data(DataConfig(path=root), progress=False).splits
    assert root / "a" / "tiny.png" not in {record.path for record in splits.train + splits.val + splits.test}
    said = [record.getMessage() for record in caplog.records if "smaller than 32 px" in record.getMessage()]
    assert len(said) == 1 and "so training leaves them out" in said[0] and "tiny.png" in said[0]
    result = runner.invoke(app, ["data", "check", str(root), "--quiet"])
    assert "below what the backbones can see (they downsample 32x), so training leaves them out" in result.output
