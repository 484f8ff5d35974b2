"""The command line says what happened: interrupted runs exit 130, nothing is overwritten silently,
stale exports are refused, and malformed configs get one sentence instead of a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.training.config.train_config import build_config, read_yaml
from retrieval.training.run.outputs.run_dir import claim_run_dir

RETRIEVAL = str(Path(sys.executable).parent / "retrieval")


@pytest.mark.slow
def test_ctrl_c_during_training_exits_130_and_says_how_to_resume(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    command = [
        RETRIEVAL,
        "train",
        "--data",
        str(synth_data),
        "--out",
        str(run),
        "--recipe",
        "normsoftmax",
        "--image-size",
        "32",
        "--embedding-dim",
        "16",
        "--epochs",
        "200",
        "--workers",
        "0",
        "--quiet",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not (run / "checkpoints" / "last.pt").is_file() and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-2000:]
    assert "--resume" in stderr and "last.pt" in stderr and "interrupted" in stderr
    assert (run / "checkpoints" / "last.pt").is_file()


def test_an_existing_run_is_refused_unless_resume_or_overwrite(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.pt").write_bytes(b"old")
    (run / "config.yaml").write_text("{}\n")
    (run / "notes.txt").write_text("the user's own file")
    with pytest.raises(ConfigError, match="already holds a training run; pass --resume .* or --overwrite"):
        claim_run_dir(run, resume=False, overwrite=False)
    claim_run_dir(run, resume=True, overwrite=False)  # continuing is fine
    assert (run / "checkpoints" / "best.pt").is_file()
    claim_run_dir(run, resume=False, overwrite=True)
    assert not (run / "checkpoints").exists() and not (run / "config.yaml").exists()
    assert (run / "notes.txt").read_text() == "the user's own file"
    claim_run_dir(tmp_path / "fresh", resume=False, overwrite=False)  # a new directory needs nothing


def test_cli_refuses_to_train_over_a_run(tmp_path: Path, synth_data: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    done = subprocess.run(
        [RETRIEVAL, "train", "--data", str(synth_data), "--out", str(run)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "already holds a training run" in done.stderr
    assert "Traceback" not in done.stderr


def _run_with_export(root: Path, tiny_model_dir: Path) -> tuple[Path, Path]:
    """A run directory whose export records the checkpoint it was made from, as `retrieval export` does."""
    import shutil

    from retrieval.indexing.exported_model.model_manifest import ModelManifest, file_sha256, manifest_json

    run = root / "run"
    shutil.copytree(tiny_model_dir, run / "export")
    (run / "checkpoints").mkdir()
    checkpoint = run / "checkpoints" / "best.pt"
    checkpoint.write_bytes(b"the exported weights")
    manifest = ModelManifest.load(run / "export")
    sources = {"checkpoints/best.pt": file_sha256(checkpoint)}
    (run / "export" / "model.json").write_text(
        manifest_json(manifest.model_copy(update={"source_checkpoints": sources}))
    )
    return run, checkpoint


def test_an_export_is_stale_when_its_checkpoint_changed_not_when_it_was_touched_or_copied(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    import shutil

    run, checkpoint = _run_with_export(tmp_path, tiny_model_dir)
    onnx_time = (run / "export" / "model.onnx").stat().st_mtime
    os.utime(checkpoint, (onnx_time + 60, onnx_time + 60))  # `touch`: same weights, newer time
    assert resolve_export_dir(run) == (run / "export").resolve()
    copied = Path(shutil.copytree(run, tmp_path / "copy", copy_function=shutil.copy))  # `cp -r`: new times
    os.utime(copied / "export" / "model.onnx", (onnx_time - 60, onnx_time - 60))
    assert resolve_export_dir(copied) == (copied / "export").resolve()
    checkpoint.write_bytes(b"more training")  # new weights, even with an older time than the export
    os.utime(checkpoint, (onnx_time - 60, onnx_time - 60))
    with pytest.raises(ConfigError, match=r"checkpoints/best.pt has changed since .* `retrieval export"):
        resolve_export_dir(run)


def test_an_export_older_than_its_checkpoint_is_refused_when_it_records_no_checkpoint(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Exports written before they recorded their checkpoints fall back to modification times."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "export")
    (run / "checkpoints").mkdir()
    checkpoint = run / "checkpoints" / "best.pt"
    checkpoint.write_bytes(b"newer weights")
    onnx_time = (run / "export" / "model.onnx").stat().st_mtime
    os.utime(checkpoint, (onnx_time + 60, onnx_time + 60))
    with pytest.raises(ConfigError, match=r"older than the checkpoint .* `retrieval export"):
        resolve_export_dir(run)
    os.utime(checkpoint, (onnx_time - 60, onnx_time - 60))
    assert resolve_export_dir(run) == (run / "export").resolve()


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        ({"model": {"embedding_dim": True}}, "model.embedding_dim: .*expects a number, got true"),
        ({"model": {"embedding_dim": 100_000_000_000}}, "model.embedding_dim: .*less than or equal to 65536"),
        ({"trainer": {"epochs": False}}, "trainer.epochs: .*expects a number, got false"),
    ],
)
def test_config_values_of_the_wrong_kind_are_one_sentence(layer: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config([("test", layer)])


def test_a_non_utf8_config_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes("model:\n  backbone: r\xe9snet\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_yaml(path)
