"""A run fits its calibration on the validation classes, measures it on the test classes, says when it rests
on too few classes, and its export carries it into model.json; a run without validation classes has none and
says so."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.exported_model.model_manifest import ModelManifest

runner = CliRunner()
QUICK = ["--epochs", "0", "--backbone", "resnet18", "--image-size", "32", "--embedding-dim", "16", "--workers", "0"]


def _train(data: Path, run: Path, *options: str) -> str:
    result = runner.invoke(app, ["train", "--data", str(data), "--out", str(run), *QUICK, "--quiet", *options])
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["export", str(run)]).exit_code == 0
    return result.output


def test_a_run_fits_on_its_validation_classes_and_the_export_keeps_it(synth_data: Path, tmp_path: Path) -> None:
    output = _train(
        synth_data, tmp_path / "run"
    )  # 2 validation classes (val_fraction 0.2 of 12): fewer than the verdict's 5
    block = json.loads((tmp_path / "run" / "test_metrics.json").read_text())["calibration"]
    assert block["fitted_on"]["classes"] == 2 and not block["reliable"]
    assert 0 <= block["float"]["ece"] <= 1 and 0 <= block["binary"]["ece"] <= 1
    assert [cut["cutoff"] for cut in block["float"]["cutoffs"]] == [0.5, 0.8, 0.9]
    assert set(block["alternatives"]) == {
        "isotonic on the first hits",
        "validation classes alone (no training images)",
        "every pair, validation base rate",
        "every pair, shifted to the test base rate",
    }
    assert "ECE of the alternatives on the same hits: isotonic on the first hits" in output
    assert "calibration: unreliable calibration: it rests on 2 validation classes" in output
    assert "calibration float : ECE" in output and "calibration binary: ECE" in output
    calibration = ModelManifest.load(tmp_path / "run" / "export").calibration
    assert calibration is not None and calibration.fitted_on.classes == 2 and not calibration.reliable
    assert calibration.fitted_on.pairs == calibration.fitted_on.queries * 10  # each query's first 10 hits
    fitted_on = calibration.fitted_on  # searched among the validation and the training images
    assert fitted_on.distractors > 0 and fitted_on.gallery == fitted_on.distractors + block["fitted_on"]["queries"]
    assert all(curve.method == "logistic" for curve in calibration.curves.values())
    assert calibration.interval is not None and calibration.interval["float"].classes == 2  # its width: 12.7 t


def test_a_run_without_validation_classes_has_no_calibration_and_says_so(synth_data: Path, tmp_path: Path) -> None:
    output = _train(synth_data, tmp_path / "run", "--split", "none")
    assert not (tmp_path / "run" / "calibration.json").exists()
    assert ModelManifest.load(tmp_path / "run" / "export").calibration is None
    assert "calibration: this model has no calibration (it was trained without validation classes" in output
