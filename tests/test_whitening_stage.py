"""The whitening stage in a run: fitted on training classes only, chosen on validation, folded into the model
and its ONNX export, and reported as the "pretrained + whitening" row next to the reference and the model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import TrainConfig, build_config
from retrieval.training.export.run_export import export_run
from retrieval.training.run.fitting.trainer import Trainer
from retrieval.training.run.inputs.split_inputs import SplitInputs, model_fingerprint
from retrieval.training.run.outputs.run_dir import RunPaths, load_checkpoint
from retrieval.training.run.outputs.run_model import load_run_model, restore_model


def _config(data: Path, epochs: int, whitening: dict[str, object]) -> TrainConfig:
    quick = {
        "data": {"path": str(data), "image_size": 32, "num_workers": 0, "val_fraction": 0.25},
        "model": {"backbone": "resnet18", "embedding_dim": 16},
        "trainer": {"epochs": epochs, "max_steps_per_epoch": 2, "batch_size": 16, "device": "cpu", "seed": 0},
        "whitening": {"bits": 512, "itq_iterations": 3, **whitening},
    }
    return build_config([("recipe", recipe("normsoftmax")), ("test", quick)])


@pytest.fixture(scope="module")
def epochs0_run(synth_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("whitening") / "run"
    Trainer(
        _config(synth_data, 0, {"method": "auto", "candidate_dims": [4, 8], "candidate_shrinkages": [0.1, 0.5]}),
        run,
        progress=False,
    ).fit()
    return run


def test_the_fit_reads_training_classes_only(epochs0_run: Path, synth_data: Path) -> None:
    splits = split_records(load_records(synth_data), val_fraction=0.25, val_fold=None, num_folds=4)
    report = json.loads(RunPaths(epochs0_run).whitening_report.read_text())["model"]
    assert report["fit_classes"] == sorted(splits.train_classes)
    assert not set(report["fit_classes"]) & (set(splits.val_classes) | set(splits.test_classes))
    assert report["fit_images"] == len(splits.train)
    # the choice was made on validation: none and every method x dim were scored there
    names = {
        f"{method}-{dim}-s{shrinkage}" for method in ("pca", "supervised") for dim in (4, 8) for shrinkage in (0.1, 0.5)
    }
    assert set(report["validation_map_at_r"]) == {"none"} | names
    chosen = "none" if report["method"] == "none" else f"{report['method']}-{report['dim']}-s{report['shrinkage']:g}"
    assert report["validation_map_at_r"][chosen] == max(report["validation_map_at_r"].values())


def test_an_epochs_0_run_reports_the_reference_with_and_without_whitening(epochs0_run: Path) -> None:
    test = json.loads(RunPaths(epochs0_run).test_metrics.read_text())
    assert {"untrained", "untrained_whitened"} <= set(test)
    # the run's model is the reference + whitening: its test metrics are that row's
    assert test["float"]["map_at_r"] == pytest.approx(test["untrained_whitened"]["float"]["map_at_r"], abs=1e-6)
    sentence = test["verdict"]["sentence"]
    assert "the untrained backbone + whitening is the run's model" in sentence
    assert f"untrained {test['untrained']['float']['map_at_r']:.3f} -> untrained + whitening" in sentence


def test_the_export_holds_the_whitening_and_matches_torch(epochs0_run: Path) -> None:
    report = json.loads(RunPaths(epochs0_run).whitening_report.read_text())["model"]
    exported = export_run(epochs0_run)
    manifest = ModelManifest.load(exported.manifest_path.parent)
    assert report["bits"] == 512  # whitened, or not (none won) with the learned code: the 512-bit output
    assert manifest.embedding_dim == 512 and exported.max_abs_diff < 1e-4
    _, _, model = load_run_model(epochs0_run)
    images = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    session = ort.InferenceSession(str(exported.onnx_path), providers=["CPUExecutionProvider"])
    onnx_out = session.run(["embeddings"], {"images": images.numpy()})[0]
    with torch.no_grad():
        np.testing.assert_allclose(onnx_out, model(images).numpy(), atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(onnx_out, axis=1), 1.0, atol=1e-5)


def test_a_trained_run_is_whitened_after_training_and_says_so(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = _config(synth_data, 1, {"method": "supervised", "dim": 8, "shrinkage": 0.1, "itq": False})
    cfg = cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"select_reference": False})})
    Trainer(cfg, run, progress=False).fit()
    paths = RunPaths(run)
    best, reference = load_checkpoint(paths.best_checkpoint), load_checkpoint(paths.whitened_reference_checkpoint)
    assert best["epoch"] == 1 and reference["epoch"] == 0
    assert best["model_config"]["whitened_dim"] == 512 and reference["model_config"]["whitened_dim"] == 512
    reports = json.loads(paths.whitening_report.read_text())
    assert reports["model"]["epoch"] == 1 and reports["reference"]["epoch"] == 0
    assert reports["model"]["validation_map_at_r"] == {}  # method and dim named: nothing chosen
    test = json.loads(paths.test_metrics.read_text())
    assert "-> untrained + whitening" in test["verdict"]["sentence"]
    assert f"-> trained {test['float']['map_at_r']:.3f}" in test["verdict"]["sentence"]


def test_eval_model_prints_the_reference_the_whitened_reference_and_the_model(
    epochs0_run: Path, synth_data: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from retrieval.cli.main import app

    export_run(epochs0_run)
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        app, ["eval", "--model", str(epochs0_run), "--data", str(synth_data), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if line.startswith("metric"))
    assert "untrained float" in header and "untrained + whitening float" in header
    document = json.loads((out / "metrics.json").read_text())
    test = json.loads(RunPaths(epochs0_run).test_metrics.read_text())
    # eval on the exported ONNX and the trainer's torch test agree; the whitened row is the model itself here
    assert document["float"]["map_at_r"] == pytest.approx(test["float"]["map_at_r"], abs=1e-4)
    assert document["reference_whitened"]["float"]["map_at_r"] == pytest.approx(document["float"]["map_at_r"], abs=1e-4)
    assert document["reference"]["float"]["map_at_r"] == pytest.approx(test["untrained"]["float"]["map_at_r"], abs=1e-4)


def test_an_epochs_0_run_embeds_its_validation_and_test_images_once(
    synth_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the whitening stage's model is the reference the run validated already (restored from its checkpoint):
    # its validation embeddings are reused, not computed again
    runs: dict[int, list[str]] = {}
    real_run = SplitInputs._run

    def counted(inputs: SplitInputs, model: torch.nn.Module) -> np.ndarray:
        runs.setdefault(id(inputs), []).append(model_fingerprint(model))
        return real_run(inputs, model)

    monkeypatch.setattr(SplitInputs, "_run", counted)
    config = _config(synth_data, 0, {"method": "supervised", "dim": 4, "candidate_shrinkages": [0.1, 0.5]})
    trainer = Trainer(config, tmp_path / "r", progress=False)
    trainer.fit()
    assert trainer.val_inputs is not None
    assert len(runs[id(trainer.val_inputs)]) == 1  # the reference pass; the stage scored its embeddings
    assert trainer.test_inputs is not None  # the reference; the whitened model: its whitening layer on them
    assert len(runs[id(trainer.test_inputs)]) == 1
    paths = RunPaths(tmp_path / "r")
    whitened = restore_model(load_checkpoint(paths.best_checkpoint), config, paths.run_dir)
    fresh = SplitInputs(
        trainer.test_inputs.dataset.records, trainer.data.eval_label_index, config, trainer.device, trainer.precision
    )
    np.testing.assert_allclose(trainer.test_inputs.embed(whitened), fresh.embed(whitened), atol=1e-5)
    report = json.loads(RunPaths(tmp_path / "r").whitening_report.read_text())["model"]
    assert set(report["validation_map_at_r"]) == {"supervised-4-s0.1", "supervised-4-s0.5"}


def test_a_model_fingerprint_follows_its_weights_not_the_object() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    restored = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    restored.load_state_dict(model.state_dict())
    assert model_fingerprint(restored) == model_fingerprint(model)
    with torch.no_grad():
        restored[0].weight[0, 0] += 1e-6
    assert model_fingerprint(restored) != model_fingerprint(model)
    other = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Identity())  # same weights, another module
    other[0].load_state_dict(model[0].state_dict())
    assert model_fingerprint(other) != model_fingerprint(model)
