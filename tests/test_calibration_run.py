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
    assert "alternatives" not in block  # the fits compared against it: bench/bench_calibration.py (issue 55)
    assert "calibration: unreliable calibration: it rests on 2 validation classes" in output
    float_line = next(line for line in output.splitlines() if line.startswith("probabilities, float index: "))
    assert (
        f"off by {block['float']['ece']:.2f} on average from how often the hit shares the query's class" in float_line
    )
    assert "probabilities, binary index: off by" in output and "calibration float : ECE" not in output  # was jargon
    cut = block["float"]["cutoffs"][0]
    if cut["precision"] is not None:
        assert f"min_probability 0.5: {cut['precision'] * 100:.0f} % of the hits it keeps share" in float_line
    verdict = json.loads((tmp_path / "run" / "test_metrics.json").read_text())["verdict"]["sentence"]
    assert output.count(verdict) == 1 and f"verdict: {verdict}" in output  # it was printed twice
    assert "optimizer" not in output and "miner" not in output  # --epochs 0: no step, no loss or optimizer
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
    assert "calibration: this model has no calibration (its run kept no validation classes to fit one on" in output
    assert "--epochs 0 --final-fit" in output  # what to run to get one
