"""The synthetic dataset generator and the ``retrieval data synth`` command."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
import typer
from PIL import Image
from typer.testing import CliRunner

from retrieval.cli.commands.data_commands import register
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.data.synth.concepts import Concept, all_concepts
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset, render_png


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)), dtype=np.float64)


def test_same_seed_gives_identical_bytes_and_another_seed_differs(tmp_path: Path) -> None:
    first = generate_synthetic_dataset(tmp_path / "a", classes=4, per_class=3, size=32, seed=7, progress=False)
    generate_synthetic_dataset(tmp_path / "b", classes=4, per_class=3, size=32, seed=7, progress=False)
    generate_synthetic_dataset(tmp_path / "c", classes=4, per_class=3, size=32, seed=8, progress=False)
    a, b, c = (_tree(tmp_path / name) for name in "abc")
    assert len(a) == 4 * 3 + 1 and first.images == 12
    assert a == b
    a_images = sorted(v for k, v in a.items() if k.endswith(".png"))
    c_images = sorted(v for k, v in c.items() if k.endswith(".png"))
    assert not set(a_images) & set(c_images)


def test_layout_names_and_source_file(tmp_path: Path) -> None:
    summary = generate_synthetic_dataset(tmp_path / "s", classes=12, per_class=2, size=24, seed=3, progress=False)
    folders = sorted(p.name for p in (tmp_path / "s").iterdir() if p.is_dir())
    assert folders == summary.class_names
    assert [int(name[1:4]) for name in folders] == list(range(12))
    assert all(re.fullmatch(r"c\d{3}-[a-z]+-[a-z]+-[a-z]+", name) for name in folders)
    assert len({name[5:] for name in folders}) == 12  # distinct concepts
    source = (tmp_path / "s" / "SOURCE.md").read_text()
    assert "retrieval data synth OUT --classes 12 --per-class 2 --size 24 --seed 3" in source
    image = Image.open(tmp_path / "s" / folders[0] / "0001.png")
    assert image.size == (24, 24) and image.mode == "RGB"
    records = load_records(tmp_path / "s")
    assert len(records) == 24 and {r.label for r in records} == set(folders)


def test_classes_with_different_colours_differ_in_mean_colour() -> None:
    def mean_red_minus_blue(colour: str) -> float:
        concept = Concept("circle", colour, "solid")
        means = [_pixels(render_png(concept, 48, 0, 0, i)).mean(axis=(0, 1)) for i in range(8)]
        return float(np.mean([m[0] - m[2] for m in means]))

    red, blue = mean_red_minus_blue("red"), mean_red_minus_blue("blue")
    assert red > 25 and blue < -25


def test_images_of_a_class_vary_but_keep_the_concept() -> None:
    concept = Concept("star", "green", "stripes")
    images = [_pixels(render_png(concept, 48, 0, 0, i)) for i in range(4)]
    for other in images[1:]:
        assert np.abs(images[0] - other).mean() > 10  # pose, background and clutter change
    # the green class colour is the most saturated colour in every image
    for pixels in images:
        saturated = pixels[(pixels.max(axis=2) - pixels.min(axis=2)) > 120]
        assert len(saturated) > 50 and (saturated[:, 1] > saturated[:, 0]).mean() > 0.6


def test_sorted_class_split_mixes_attributes_in_both_halves(tmp_path: Path) -> None:
    generate_synthetic_dataset(tmp_path / "s", classes=40, per_class=2, size=16, seed=0, progress=False)
    splits = split_records(load_records(tmp_path / "s"), val_fraction=0.0)
    for half in (splits.train_classes, splits.test_classes):
        parts = [name.split("-")[1:] for name in half]
        assert len({shape for shape, _, _ in parts}) >= 5
        assert len({colour for _, colour, _ in parts}) >= 5
        assert len({texture for _, _, texture in parts}) >= 4


def test_too_many_classes_names_the_maximum(tmp_path: Path) -> None:
    limit = len(all_concepts())
    with pytest.raises(DataError, match=f"between 1 and {limit}"):
        generate_synthetic_dataset(tmp_path / "s", classes=limit + 1, per_class=1, progress=False)
    assert not (tmp_path / "s").exists()


def test_refuses_non_empty_output_unless_overwriting_its_own(tmp_path: Path) -> None:
    out = tmp_path / "s"
    generate_synthetic_dataset(out, classes=3, per_class=1, size=16, progress=False)
    with pytest.raises(DataError, match="is not empty; choose a new folder or pass --overwrite"):
        generate_synthetic_dataset(out, classes=2, per_class=1, size=16, progress=False)
    generate_synthetic_dataset(out, classes=2, per_class=1, size=16, progress=False, overwrite=True)
    assert len([p for p in out.iterdir() if p.is_dir()]) == 2  # replaced, no stale class left

    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_bytes(b"precious")
    with pytest.raises(DataError, match="does not say it was written by `retrieval data synth`"):
        generate_synthetic_dataset(foreign, classes=2, per_class=1, size=16, progress=False, overwrite=True)
    (foreign / "SOURCE.md").write_text("# Caltech-101\n")  # another dataset's SOURCE.md is not our marker
    with pytest.raises(DataError, match="does not say it was written by `retrieval data synth`"):
        generate_synthetic_dataset(foreign, classes=2, per_class=1, size=16, progress=False, overwrite=True)
    assert (foreign / "holiday.jpg").read_bytes() == b"precious"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left behind


def _cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_cli_synth_writes_the_dataset_and_prints_one_line(tmp_path: Path) -> None:
    out = tmp_path / "synth"
    args = ["data", "synth", str(out), "--classes", "3", "--per-class", "2", "--size", "20", "--seed", "5"]
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 0, result.output
    assert "wrote 6 images (3 classes x 2, 20 px, seed 5)" in result.output
    assert len(list(out.rglob("*.png"))) == 6

    again = CliRunner().invoke(_cli(), args)
    assert isinstance(again.exception, DataError) and "--overwrite" in str(again.exception)
    assert CliRunner().invoke(_cli(), args + ["--overwrite"]).exit_code == 0


def test_cli_help_and_defaults() -> None:
    result = CliRunner().invoke(_cli(), ["data", "synth", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--classes", "--per-class", "--size", "--seed", "--overwrite"):
        assert option in result.output
    assert re.search(r"--classes.*default: 40", result.output)
    assert re.search(r"--per-class.*default: 30", result.output)
