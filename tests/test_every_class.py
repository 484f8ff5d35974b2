"""Training on every class: ``data.split none`` (nothing held out, nothing measured) and ``trainer.final_fit``
(the class-disjoint fit chooses the epochs and reports the test classes, then the run's model is trained
again on every class); and ``retrieval study`` refusing impossible batches before its first trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from retrieval import export, study, train
from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict

FAST = {
    "image_size": 32,
    "num_workers": 0,
    "backbone": "resnet18",
    "embedding_dim": 16,
    "batch_size": 16,
    "device": "cpu",
    "max_steps_per_epoch": 2,
    "progress": False,
    "overwrite": True,
}
CLASSES = 24  # synth_data


@pytest.mark.slow
def test_split_none_trains_on_every_class_and_says_nothing_was_measured(synth_data: Path, tmp_path: Path) -> None:
    run = train(synth_data, tmp_path / "run", split="none", epochs=1, **FAST)
    assert run.test is None and run.best_epoch == 1  # no validation: the last epoch is the model
    assert run.verdict is not None and run.verdict.decision == "unmeasured"
    assert "data.split none: no classes were held out" in run.verdict.sentence
    written = json.loads((tmp_path / "run/test_metrics.json").read_text())
    assert written["verdict"]["sentence"] == run.verdict.sentence
    manifest = export(run.run_dir).manifest
    assert len(manifest.training_classes) == CLASSES and manifest.verdict == run.verdict


@pytest.mark.slow
def test_final_fit_chooses_epochs_on_the_split_then_retrains_on_every_class(synth_data: Path, tmp_path: Path) -> None:
    run = train(synth_data, tmp_path / "run", recipe="normsoftmax", epochs=2, final_fit=True, **FAST)
    selection = tmp_path / "run" / "selection"
    first = json.loads((selection / "test_metrics.json").read_text())
    assert run.final_fit is not None and run.final_fit.epochs == first["best_epoch"]
    assert run.final_fit.num_classes == CLASSES and run.final_fit.selection_dir == selection
    # the test figures are the first fit's, and the verdict says so
    assert run.test is not None and run.test.float_metrics.map_at_r == first["float"]["map_at_r"]
    assert run.test.reference is not None and run.test.reference.name == "untrained"
    assert run.verdict is not None and run.verdict.validation is not None  # the first fit's decision and interval
    assert run.verdict.validation == TrainingVerdict.model_validate(first["verdict"]).validation
    assert "final fit: " in run.verdict.sentence and "come from that first fit" in run.verdict.sentence
    final_config = yaml.safe_load((tmp_path / "run/config.yaml").read_text())
    assert final_config["data"]["split"] == "none" and final_config["trainer"]["epochs"] == run.final_fit.epochs
    assert yaml.safe_load((selection / "config.yaml").read_text())["trainer"]["final_fit"] is True
    manifest = export(run.run_dir).manifest  # the run's own model: every class
    assert len(manifest.training_classes) == CLASSES and manifest.verdict == run.verdict
    first_classes = export(selection, tmp_path / "selection_export").manifest.training_classes
    assert len(first_classes) < CLASSES


def test_final_fit_needs_the_class_disjoint_split(synth_data: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="final_fit chooses the epochs on the class-disjoint split"):
        train(synth_data, tmp_path / "run", split="none", final_fit=True, epochs=1, **FAST)
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.slow
def test_study_refuses_batches_no_fold_can_form_before_the_first_trial(synth_data: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError) as refused:
        study(
            synth_data,
            ["triplet"],
            tmp_path / "study",
            folds=2,
            trials=1,
            seeds=1,
            cached_features=True,
            epochs=1,
            image_size=32,
            backbone="resnet18",
            embedding_dim=8,
            batch_size=64,  # 16 classes of 4 images per batch; a fold trains on 6 classes
            overrides=["data.num_workers=0"],
            progress=False,
        )
    message = str(refused.value)
    assert "--losses triplet cannot train on fold 0 of 2" in message and "no trial has run" in message
    assert "lower trainer.batch_size" in message
    assert not (tmp_path / "study" / "search").exists()


@pytest.mark.slow
def test_final_fit_keeps_the_measured_fits_calibration_and_says_what_it_rests_on(
    synth_data: Path, tmp_path: Path
) -> None:
    run = train(synth_data, tmp_path / "run", epochs=0, final_fit=True, **FAST)
    measured = ModelManifest.load(export(tmp_path / "run" / "selection", tmp_path / "sel").manifest_path.parent)
    manifest = export(run.run_dir).manifest
    assert measured.calibration is not None and manifest.calibration is not None  # was None: thrown away
    assert manifest.calibration.curves == measured.calibration.curves  # the same fit, carried over
    kept = manifest.calibration.measured_fit
    assert kept is not None and kept.epochs == 0 and kept.final_classes == CLASSES
    assert kept.training_classes == len(measured.training_classes) < CLASSES
    assert "kept for the final fit on all 24 classes" in manifest.calibration.sentence
    assert run.calibration is not None and run.calibration["sentence"] == manifest.calibration.sentence
    (tmp_path / "run" / "calibration.json").unlink()  # a final fit trained before it kept the calibration
    again = export(run.run_dir, tmp_path / "again").manifest.calibration  # re-exporting carries it over
    assert again is not None and again.curves == measured.calibration.curves and again.measured_fit == kept
