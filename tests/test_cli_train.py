"""The ``retrieval`` command as a user meets it: one-sentence errors, exit code 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RETRIEVAL = [sys.executable, "-c", "from retrieval.cli.main import main; main()"]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([*RETRIEVAL, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_unknown_config_key_is_named_without_traceback(synth_data: Path, tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text("trainer:\n  epoch: 3\n")
    result = run_cli("train", "--data", str(synth_data), "--out", str(tmp_path / "run"), "--config", str(config))
    assert result.returncode == 2
    assert "trainer.epoch: unknown key" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_missing_dataset_and_bad_set_option(tmp_path: Path) -> None:
    result = run_cli("train", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert str(tmp_path / "missing") in result.stderr
    result = run_cli("train", "--data", str(tmp_path), "--out", str(tmp_path / "run"), "--set", "trainer.patience")
    assert result.returncode == 2 and "--set expects KEY=VALUE" in result.stderr


def test_unknown_loss_and_recipe_list_the_known_names(synth_data: Path, tmp_path: Path) -> None:
    result = run_cli("train", "--data", str(synth_data), "--out", str(tmp_path / "r"), "--loss", "tripletloss")
    assert result.returncode == 2 and "known losses:" in result.stderr and "triplet" in result.stderr
    result = run_cli("train", "--data", str(synth_data), "--out", str(tmp_path / "r"), "--recipe", "nope")
    assert result.returncode == 2 and "known recipes:" in result.stderr


def test_too_few_classes_is_one_sentence_before_training(tmp_path: Path) -> None:
    from PIL import Image

    for label in ("a", "b"):
        (tmp_path / "data" / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (16, 16), (i * 40, 0, 0)).save(tmp_path / "data" / label / f"{i}.png")
    result = run_cli("train", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "class" in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_losses_command_lists_every_loss() -> None:
    result = run_cli("losses")
    assert result.returncode == 0
    for name in ("normalized_softmax", "triplet", "multi_similarity", "proxy_anchor", "arcface", "soft_triple"):
        assert name in result.stdout


@pytest.mark.slow
def test_train_then_export_on_the_command_line(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = run_cli(
        "train",
        "--data",
        str(synth_data),
        "--out",
        str(run),
        "--recipe",
        "triplet",
        "--image-size",
        "32",
        "--embedding-dim",
        "32",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--max-steps-per-epoch",
        "2",
        "--workers",
        "0",
        "--device",
        "cpu",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "test float" in result.stdout and "MAP@R" in result.stdout
    result = run_cli("export", str(run))
    assert result.returncode == 0, result.stderr[-2000:]
    assert (run / "export" / "model.onnx").is_file() and (run / "export" / "model.json").is_file()


def test_every_train_option_names_a_real_config_key() -> None:
    """The options are declared once (with their config key); each key must exist in TrainConfig."""
    from typing import get_args, get_type_hints

    from retrieval.cli.train_commands import ConfigKey, train
    from retrieval.training.config import TrainConfig

    keys = [
        meta.path
        for hint in get_type_hints(train, include_extras=True).values()
        for meta in get_args(hint)[1:]
        if isinstance(meta, ConfigKey)
    ]
    assert len(keys) >= 15
    for path in keys:
        section, key = path.split(".")
        assert key in TrainConfig.model_fields[section].annotation.model_fields, path
