"""What the command line tells a user: --version, data info of any dataset, the valid keys of a
misspelt --set, a misspelt loss before the image scan."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import TrainConfig, build_config

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def tiny_folder(root: Path, classes: int, per_class: int) -> Path:
    for c in range(classes):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (16, 16), (40 * c, 10 * i, 0)).save(root / f"c{c}" / f"{i}.png")
    return root


def test_version_comes_from_the_package_metadata() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.output == f"retrieval {metadata.version('retrieval')}\n"


def test_data_info_describes_a_dataset_too_small_to_split(tmp_path: Path) -> None:
    data = tiny_folder(tmp_path / "data", classes=2, per_class=3)
    (data / "c1" / "3.png").write_bytes(Image.new("RGB", (8, 8)).tobytes()[:10])  # listed, not decoded
    result = invoke("data", "info", data)
    assert result.exit_code == 0, result.output
    assert f"{data}: ImageFolder, 7 images of 2 classes (3-4 per class)" in result.output
    assert "no class-disjoint split: too few classes" in result.output


def test_data_info_shows_the_split_when_there_is_one(tmp_path: Path) -> None:
    data = tiny_folder(tmp_path / "data", classes=8, per_class=2)
    result = invoke("data", "info", data, "--val-fraction", "0.5")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith("16 images of 8 classes (2-2 per class)")
    assert [line.split()[:5] for line in lines[1:4]] == [
        ["train", "4", "images", "2", "classes"],
        ["val", "4", "images", "2", "classes"],
        ["test", "8", "images", "4", "classes"],
    ]
    assert lines[4:] == [  # 2 validation classes cannot choose an epoch reliably: the verdict's threshold
        "warning: with --val-fraction 0.5, 2 validation classes (4 images) choose the epoch, fewer than the 5 "
        "classes and 100 queries that tell a gain from noise; add classes, raise --val-fraction, or keep the "
        "backbone with --epochs 0"
    ]


@pytest.mark.parametrize(
    ("layer", "fragment"),
    [
        ({"trainer": {"epoch": 3}}, "trainer.epoch: unknown key (did you mean epochs? keys of trainer: epochs, "),
        ({"traner": {"epochs": 3}}, "traner: unknown key (did you mean trainer? sections: data, model, loss, "),
        ({"loss": {"nme": "triplet"}}, "loss.nme: unknown key (did you mean name? keys of loss: name, params, "),
    ],
)
def test_an_unknown_key_lists_the_valid_ones(layer: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config([("--set", layer)])
    assert fragment in str(caught.value)
    section = next(iter(layer))
    valid = (
        TrainConfig.model_fields if section == "traner" else TrainConfig.model_fields[section].annotation.model_fields
    )
    assert all(key in str(caught.value) for key in valid)


def test_a_misspelt_loss_is_reported_before_the_image_scan(tmp_path: Path) -> None:
    data = tiny_folder(tmp_path / "data", classes=8, per_class=3)
    (data / "c0" / "broken.png").write_bytes(b"not an image")  # the scan would stop on this first
    result = invoke("train", "--data", data, "--out", tmp_path / "run", "--loss", "tripplet", "--on-bad-image", "fail")
    assert isinstance(result.exception, ConfigError), result.output
    assert "unknown loss 'tripplet'; did you mean triplet" in str(result.exception) and "triplet" in str(
        result.exception
    )
    assert "checking images" not in result.output
