"""The reference row (``training.reference``): the starting backbone's pooled features, reduced with PCA fitted
on training-class images only, equal a hand-built computation; the trainer and ``retrieval eval`` report it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.exported_model.resolution import run_dir_of
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import TrainConfig, build_config
from retrieval.training.data_pipeline.transforms import build_eval_transform
from retrieval.training.export.run_export import export_run
from retrieval.training.model.device import Precision
from retrieval.training.run.fitting.trainer import Trainer
from retrieval.training.run.measures import reference
from retrieval.training.run.measures.reference import fit_reduction, fit_sample, pretrained_reference
from retrieval.training.run.measures.reference_eval import starting_model

FP32 = Precision(False, torch.float32, False)
DIM = 16  # < resnet18's 512 pooled features: the PCA case


def _records(classes: int, per_class: int) -> list[ImageRecord]:
    return [ImageRecord(path=Path(f"/x/{c}/{i}.png"), label=f"c{c}") for c in range(classes) for i in range(per_class)]


def test_fit_sample_is_deterministic_spread_and_capped() -> None:
    records = _records(5, 10)
    shuffled = records[:]
    random.Random(0).shuffle(shuffled)
    sample = fit_sample(shuffled, size=10)
    assert sample == fit_sample(records, size=10)
    assert len(sample) == 10 and {r.label for r in sample} == {f"c{c}" for c in range(5)}  # every class
    assert fit_sample(shuffled, size=100) == sorted(records, key=lambda r: (r.label, str(r.path)))


def _hand_pca(train: np.ndarray, test: np.ndarray, dim: int) -> np.ndarray:
    mean = train.mean(axis=0, dtype=np.float64)
    _, _, components = np.linalg.svd(train - mean, full_matrices=False)
    reduced = (test - mean) @ components[:dim].T
    return reduced / np.linalg.norm(reduced, axis=1, keepdims=True)


def test_fit_reduction_is_pca_of_the_training_features_or_centring() -> None:
    rng = np.random.default_rng(0)
    train, test = rng.random((40, 12)).astype(np.float32), rng.random((7, 12)).astype(np.float32)
    reduced = fit_reduction(train, 5).apply(test)
    expected = _hand_pca(train, test, 5)
    # principal directions are defined up to sign: compare the inner products, which signs do not change
    np.testing.assert_allclose(reduced @ reduced.T, expected @ expected.T, atol=1e-5)
    kept = fit_reduction(train, 12)  # not wider than the embedding: centred on the training mean, normalised
    centred = test - train.mean(axis=0)
    np.testing.assert_allclose(kept.apply(test), centred / np.linalg.norm(centred, axis=1, keepdims=True), atol=1e-6)
    assert (kept.dim, fit_reduction(train[:3], 5).dim) == (12, 3)  # never more components than training images


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A torchvision-format resnet18 state dict standing in for downloaded ImageNet weights."""
    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("weights") / "resnet18.pth"
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), path)
    return path


def _config(data: Path, pretrained: Path | None, **trainer: object) -> TrainConfig:
    quick = {
        "data": {"path": str(data), "image_size": 32, "num_workers": 0, "val_fraction": 0.25},
        "model": {"backbone": "resnet18", "pretrained": str(pretrained) if pretrained else None, "embedding_dim": DIM},
        "trainer": {"epochs": 1, "max_steps_per_epoch": 2, "batch_size": 16, "device": "cpu", "seed": 0, **trainer},
    }
    return build_config([("recipe", recipe("normsoftmax")), ("test", quick)])


def _hand_pooled(weights: Path, cfg: TrainConfig, records: list[ImageRecord]) -> np.ndarray:
    net = torchvision.models.resnet18(weights=None)
    net.load_state_dict(torch.load(weights, weights_only=True))
    net.fc = torch.nn.Identity()  # torchvision's own forward: trunk, global average pooling, flatten
    transform = build_eval_transform(cfg.data, "resnet18")
    with torch.no_grad():
        images = torch.stack([transform(Image.open(r.path).convert("RGB")) for r in records])
        return net.eval()(images).numpy().astype(np.float64)


def test_reference_equals_hand_built_and_fits_on_training_classes_only(
    synth_data: Path, weights_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config(synth_data, weights_file)
    splits = split_records(load_records(synth_data), val_fraction=0.25)
    train_pool = sorted(splits.train + splits.val, key=lambda r: (r.label, str(r.path)))
    fitted: list[np.ndarray] = []

    def spy(features: np.ndarray, dim: int) -> reference.FeatureReduction:
        fitted.append(features)
        return fit_reduction(features, dim)

    monkeypatch.setattr(reference, "fit_reduction", spy)
    result = pretrained_reference(
        starting_model(cfg), cfg, splits.test, train_pool, dim=DIM, device=torch.device("cpu"), precision=FP32
    )
    hand_train, hand_test = _hand_pooled(weights_file, cfg, train_pool), _hand_pooled(weights_file, cfg, splits.test)
    assert len(fitted) == 1 and len(train_pool) < reference.FIT_IMAGES  # the sample is the whole training pool
    np.testing.assert_allclose(fitted[0], hand_train, rtol=1e-4, atol=1e-4)  # training images, no test image
    assert not {r.label for r in train_pool} & {r.label for r in splits.test}
    expected = _hand_pca(hand_train, hand_test, DIM)
    assert result.embeddings.shape == (len(splits.test), DIM)
    np.testing.assert_allclose(result.embeddings @ result.embeddings.T, expected @ expected.T, atol=1e-4)
    assert result.details() == {
        "name": "pretrained",
        "feature_dim": 512,
        "dim": DIM,
        "reduction": "pca",
        "fit_images": len(train_pool),
    }


runner = CliRunner()


def _table_header(output: str) -> str:
    return next(line for line in output.splitlines() if "metric " in line)  # may follow a progress bar


@pytest.mark.slow
@pytest.mark.parametrize("pretrained", [True, False], ids=["pretrained", "untrained"])
def test_eval_reports_the_reference_column_the_trainer_reported(
    synth_data: Path, weights_file: Path, tmp_path: Path, pretrained: bool
) -> None:
    name = "pretrained" if pretrained else "untrained"
    run = tmp_path / "run"
    Trainer(_config(synth_data, weights_file if pretrained else None), run, progress=False).fit()
    trained = json.loads((run / "test_metrics.json").read_text())
    assert trained[name]["reference"]["dim"] == DIM and ("untrained" in trained) != pretrained
    export_run(run)

    result = runner.invoke(app, ["eval", "--model", str(run), "--data", str(synth_data), "--out", str(tmp_path / "e")])
    assert result.exit_code == 0, result.output
    header = _table_header(result.output)
    assert f"{name} float" in header and f"{name} binary" in header, result.output
    if not pretrained:
        assert "trained from random weights" in result.output
    metrics = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert metrics["reference"]["name"] == name
    for kind in ("float", "binary"):  # the same images, weights, PCA sample and metric function as the trainer's
        for metric in ("map_at_r", "r_precision", "precision_at_1"):
            assert metrics["reference"][kind][metric] == pytest.approx(trained[name][kind][metric], abs=1e-4)

    assert run_dir_of(run / "export") == run  # an export inside its run directory finds the run's config too
    off = runner.invoke(
        app,
        [
            "eval",
            "--model",
            str(run / "export"),
            "--data",
            str(synth_data),
            "--no-reference",
            "--out",
            str(tmp_path / "n"),
        ],
    )
    assert off.exit_code == 0 and name not in _table_header(off.output)
    assert "reference" not in json.loads((tmp_path / "n" / "metrics.json").read_text())


def test_eval_of_a_model_without_its_run_says_there_is_no_reference(
    tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path
) -> None:
    args = [
        "eval",
        "--model",
        str(tiny_model_dir),
        "--data",
        str(gallery_dir),
        "--split",
        "all",
        "--out",
        str(tmp_path),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "no reference column: no training run config.yaml" in result.output
    assert "reference" not in json.loads((tmp_path / "metrics.json").read_text())
