"""Epoch 0 is the starting backbone (the reference row as a model), and a candidate like every trained epoch.

A run whose training never beats it keeps it and says so; ``--epochs 0`` makes a run of it alone; both
export like any run, and the exported model embeds as the reference row does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import ModelConfig, TrainConfig, build_config
from retrieval.training.export.run_export import export_run
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.run.fitting.trainer import Trainer
from retrieval.training.run.measures.reference import PooledFeatures, fit_reduction, reference_model

runner = CliRunner()


@pytest.mark.parametrize("dim", [8, 512])  # PCA (fewer dimensions than resnet18's 512 features), centring
def test_the_reference_model_embeds_as_the_reduction_does(dim: int) -> None:
    torch.manual_seed(0)
    model = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=32)).eval()
    fit_images, images = torch.randn(20, 3, 32, 32), torch.randn(5, 3, 32, 32)
    with torch.no_grad():
        reduction = fit_reduction(PooledFeatures(model)(fit_images).numpy(), dim)
        expected = reduction.apply(PooledFeatures(model)(images).numpy())
        reference = reference_model(model, reduction).eval()
        np.testing.assert_allclose(reference(images).numpy(), expected, atol=1e-5)
    assert reference.embedding_dim == reduction.dim and model.embedding_dim == 32  # the trained model is untouched


def _config(data: Path, **trainer: object) -> TrainConfig:
    quick = {
        "data": {"path": str(data), "image_size": 32, "num_workers": 0, "val_fraction": 0.25},
        "model": {"backbone": "resnet18", "embedding_dim": 16},
        "trainer": {"epochs": 2, "max_steps_per_epoch": 3, "batch_size": 16, "device": "cpu", "seed": 0, **trainer},
    }
    return build_config([("recipe", recipe("normsoftmax")), ("test", quick)])


def _collapse(embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """A loss that pulls every embedding onto one point: training that makes retrieval worse."""
    return -(embeddings @ embeddings.T).mean()


def test_a_run_whose_training_hurts_keeps_the_starting_model_and_says_so(
    synth_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    trainer = Trainer(_config(synth_data), run, progress=False)
    monkeypatch.setattr(trainer.loss, "forward", _collapse)
    result = trainer.fit()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [0, 1, 2]
    assert all(row["val"]["map_at_r"] < rows[0]["val"]["map_at_r"] for row in rows[1:])
    assert result.best_epoch == 0
    test = json.loads((run / "test_metrics.json").read_text())
    verdict = test["verdict"]
    assert verdict["decision"] == "reference" and "training did not help" in verdict["sentence"]
    assert "the untrained backbone is kept" in verdict["sentence"]
    # 3 validation classes: the headline says the choice is unreliable, and what to do
    assert verdict["sentence"].startswith("unreliable choice: it rests on 3 validation classes (36 queries)")
    assert verdict["validation"]["queries"] == 36 and verdict["reliable"] is False
    # the run's model IS the reference: its test metrics are the reference row's
    assert test["float"]["map_at_r"] == pytest.approx(test["untrained"]["float"]["map_at_r"], abs=1e-6)
    exported = export_run(run)
    manifest = ModelManifest.load(exported.manifest_path.parent)
    assert manifest.embedding_dim == 16 and exported.max_abs_diff < 1e-4  # PCA to the embedding size, checked
    assert manifest.verdict is not None and manifest.verdict.sentence == verdict["sentence"]
    assert manifest.verdict.decision == "reference" and manifest.verdict.validation_classes == 3


def test_a_run_whose_training_helps_says_by_how_much(synth_data: Path, tmp_path: Path) -> None:
    cfg = build_config(
        [
            ("base", _config(synth_data, epochs=4).model_dump(mode="json")),
            ("more", {"trainer": {"max_steps_per_epoch": None}, "optimizer": {"lr": 1e-3, "head_lr": 1e-3}}),
        ]
    )
    result = Trainer(cfg, tmp_path / "run", progress=False).fit()
    verdict = json.loads((tmp_path / "run" / "test_metrics.json").read_text())["verdict"]
    gain = verdict["validation"]
    assert result.best_epoch > 0 and verdict["decision"] == "trained" and gain["low"] > 0
    assert "training improved validation MAP@R" in verdict["sentence"]
    assert gain["after"] > gain["before"]


def test_epochs_zero_is_the_starting_backbone_as_a_run(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["train", "--data", str(synth_data), "--out", str(run), "--epochs", "0", "--backbone", "resnet18"]
    args += ["--image-size", "32", "--embedding-dim", "16", "--workers", "0", "--quiet"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "no training epoch ran: the untrained backbone is the run's model" in result.output
    assert runner.invoke(app, ["export", str(run)]).exit_code == 0
    session = ort.InferenceSession(str(run / "export" / "model.onnx"), providers=["CPUExecutionProvider"])
    out = session.run(None, {"images": np.zeros((2, 3, 32, 32), np.float32)})[0]
    assert out.shape == (2, 16)
