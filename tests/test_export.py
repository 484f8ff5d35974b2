"""ONNX export of a run directory: files, manifest, parity with torch, dynamic batch, errors, CLI."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
import typer
from typer.testing import CliRunner

from retrieval.cli.commands import export_commands
from retrieval.indexing.common.errors import ConfigError, RetrievalError
from retrieval.indexing.exported_model.model_manifest import ModelManifest, file_sha256
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.export.run_export import export_run
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model
from retrieval.training.run.outputs.run_dir import RunPaths, load_run_config, save_checkpoint, write_run_config

VAL_METRICS = {"map_at_r": 0.25, "recall_at_1": 0.5, "r_precision": 0.3}


@dataclass
class Run:
    run_dir: Path
    config: TrainConfig
    model: EmbeddingModel


def write_run(run_dir: Path, embedding_dim: int = 32) -> Run:
    """A run directory as the trainer writes it: config.yaml + checkpoints/best.pt (random resnet18, 64 px)."""
    config = TrainConfig.model_validate(
        {
            "data": {"image_size": 64},
            "model": {"backbone": "resnet18", "embedding_dim": embedding_dim, "pooling": "avgmax", "layer_norm": True},
            "loss": {"name": "normalized_softmax"},
        }
    )
    torch.manual_seed(0)
    model = build_embedding_model(config.model)
    with torch.no_grad():  # non-trivial BatchNorm statistics, so eval-mode export is really exercised
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 2.0)
    write_run_config(run_dir, config)
    checkpoint = {
        "model": model.state_dict(),
        "loss": {},
        "optimizer": {},
        "scheduler": {},
        "scaler": None,
        "epoch": 3,
        "global_step": 30,
        "best_map_at_r": 0.25,
        "val_metrics": dict(VAL_METRICS, epoch=3),
        "num_classes": 10,
        "config": config.model_dump(mode="json"),
        "loss_name": "normalized_softmax",
    }
    save_checkpoint(RunPaths(run_dir).best_checkpoint, checkpoint)  # type: ignore[arg-type]
    return Run(run_dir, config, model.eval())


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, ModelManifest, float]:
    run = write_run(tmp_path_factory.mktemp("run"))
    result = export_run(run.run_dir)
    return run, result.manifest, result.max_abs_diff


def test_run_config_round_trips(exported: tuple[Run, ModelManifest, float]) -> None:
    run, _, _ = exported
    assert load_run_config(run.run_dir) == run.config


def test_export_writes_files_and_manifest(exported: tuple[Run, ModelManifest, float]) -> None:
    run, manifest, max_diff = exported
    out = RunPaths(run.run_dir).export_dir
    assert (out / "model.onnx").is_file() and (out / "model.json").is_file()
    assert ModelManifest.load(out) == manifest
    assert manifest.onnx_sha256 == file_sha256(out / "model.onnx")
    assert manifest.embedding_dim == 32 and manifest.precision == "fp32"
    assert (manifest.preprocessing.resize, manifest.preprocessing.crop) == (73, 64)  # round(64 * 256 / 224)
    assert manifest.preprocessing.mean == (0.485, 0.456, 0.406) and manifest.preprocessing.std == (0.229, 0.224, 0.225)
    assert manifest.l2_normalized and manifest.binarization_threshold == 0.0
    assert (manifest.backbone, manifest.loss) == ("resnet18", "normalized_softmax")
    assert manifest.config_hash == run.config.config_hash()
    best = run.run_dir / "checkpoints" / "best.pt"
    assert manifest.source_checkpoints == {"checkpoints/best.pt": file_sha256(best)}  # the stale-export check
    assert manifest.validation_metrics == dict(VAL_METRICS, epoch=3.0)
    created = datetime.fromisoformat(manifest.created_at)
    assert created.tzinfo is not None and abs(datetime.now(timezone.utc) - created).total_seconds() < 600
    assert 0.0 <= max_diff < 1e-4


@pytest.mark.parametrize("batch", [1, 5])
def test_onnx_matches_torch_on_fresh_inputs(exported: tuple[Run, ModelManifest, float], batch: int) -> None:
    run, manifest, _ = exported
    onnx_path = RunPaths(run.run_dir).export_dir / "model.onnx"
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    images = torch.rand(batch, 3, 64, 64, generator=torch.Generator().manual_seed(100 + batch)) * 4 - 2
    (actual,) = session.run([manifest.output_name], {manifest.input_name: images.numpy()})
    with torch.no_grad():
        expected = run.model(images).numpy()
    assert actual.shape == (batch, 32) and actual.dtype == np.float32
    assert np.abs(actual - expected).max() < 1e-4
    np.testing.assert_allclose(np.linalg.norm(actual, axis=1), 1.0, atol=1e-5)


def test_corrupt_checkpoint_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    RunPaths(run.run_dir).best_checkpoint.write_bytes(b"\x00garbage, not a checkpoint")
    with pytest.raises(RetrievalError, match="cannot be read.*corrupt"):
        export_run(run.run_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_pieces_are_clear_errors(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    with pytest.raises(RetrievalError, match=r"last\.pt does not exist"):
        export_run(run.run_dir, checkpoint="last")
    with pytest.raises(RetrievalError, match="run directory .* does not exist"):
        export_run(tmp_path / "nope")
    RunPaths(run.run_dir).config.unlink()
    with pytest.raises(ConfigError, match=r"config\.yaml does not exist"):
        export_run(run.run_dir)


def test_checkpoint_of_another_model_is_rejected(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", embedding_dim=16)
    other = TrainConfig.model_validate(
        {"data": {"image_size": 64}, "model": {"backbone": "resnet18", "embedding_dim": 32}}
    )
    write_run_config(run.run_dir, other)
    with pytest.raises(RetrievalError, match="does not fit its config.yaml"):
        export_run(run.run_dir)


def test_cli_fp16_export(exported: tuple[Run, ModelManifest, float], tmp_path: Path) -> None:
    run, fp32_manifest, _ = exported
    run_dir = tmp_path / "run"
    shutil.copytree(run.run_dir, run_dir, ignore=shutil.ignore_patterns("export"))
    app = typer.Typer()
    export_commands.register(app)
    app.command("noop")(lambda: None)  # a second command keeps typer from flattening the app
    result = CliRunner().invoke(app, ["export", str(run_dir), "--out", str(tmp_path / "fp16"), "--fp16"])
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "fp16" / "model.onnx") in result.output and "embedding dim 32" in result.output
    manifest = ModelManifest.load(tmp_path / "fp16")
    assert manifest.precision == "fp16" and manifest.onnx_sha256 != fp32_manifest.onnx_sha256
    onnx_bytes = (tmp_path / "fp16" / "model.onnx").read_bytes()
    assert manifest.onnx_sha256 == hashlib.sha256(onnx_bytes).hexdigest()
    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].type == "tensor(float)" and session.get_outputs()[0].type == "tensor(float)"
    images = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(7))
    (actual,) = session.run(None, {"images": images.numpy()})
    with torch.no_grad():
        expected = run.model(images).numpy()
    assert np.abs(actual - expected).max() < 2e-2


def test_run_paths_layout(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    relative = {
        name: getattr(paths, name).relative_to(tmp_path).as_posix()
        for name in (
            "config",
            "metrics",
            "checkpoints_dir",
            "best_checkpoint",
            "last_checkpoint",
            "curves",
            "test_metrics",
            "export_dir",
        )
    }
    assert relative == {
        "config": "config.yaml",
        "metrics": "metrics.jsonl",
        "checkpoints_dir": "checkpoints",
        "best_checkpoint": "checkpoints/best.pt",
        "last_checkpoint": "checkpoints/last.pt",
        "curves": "curves.png",
        "test_metrics": "test_metrics.json",
        "export_dir": "export",
    }


def test_invalid_run_config_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("model:\n  backbone: resnet18\n  embeding_dim: 3\n")
    with pytest.raises(ConfigError, match=r"model\.embeding_dim: unknown key"):
        load_run_config(tmp_path)
