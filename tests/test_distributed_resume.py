"""A run trained by 2 processes (torchrun, gloo) resumes with 1 process: the epoch counter, the optimizer
state, the loss's proxies and the learning-rate schedule continue where the 2 processes left them.

Resuming at another world size changes the steps per epoch (the per-rank batch stays, so one process
takes twice the steps), and the schedule must follow epochs, not the old step count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from launching import torchrun_prefix

RETRIEVAL = str(Path(sys.executable).parent / "retrieval")
MIN_LR_RATIO = 0.01  # the cosine schedule's floor (ScheduleConfig.min_lr_ratio)


def _train(prefix: list[str], *options: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [*prefix, RETRIEVAL, "train", *options], capture_output=True, text=True, env=env, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]


def _checkpoint(run: Path) -> dict:
    return torch.load(run / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)


@pytest.mark.slow
def test_two_processes_then_one_continue_the_same_run(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    common = ["--out", str(run), "--device", "cpu", "--workers", "0", "--quiet"]
    _train(
        torchrun_prefix(2),
        *common,
        *["--data", str(synth_data), "--recipe", "proxy_anchor", "--image-size", "32", "--embedding-dim", "16"],
        *["--epochs", "1", "--batch-size", "8", "--images-per-class", "2"],
    )
    first = _checkpoint(run)
    assert first["epoch"] == 1 and first["world_size"] == 2
    steps_two = first["global_step"]  # batches of one rank per epoch at 2 processes

    _train([], *common, "--resume", "--epochs", "2")
    second = _checkpoint(run)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [0, 1, 2]
    steps_one = second["global_step"] - steps_two
    assert second["epoch"] == 2 and second["world_size"] == 1
    assert steps_one == second["steps_per_epoch"] > steps_two  # one process takes the whole epoch itself
    assert [row["global_step"] for row in rows] == [0, steps_two, steps_two + steps_one]

    # the loss's proxies: restored (their optimizer state counts both stages' steps), trained on, finite
    proxies = {name: value for name, value in second["loss"].items() if value.is_floating_point()}
    assert proxies and proxies.keys() == {n for n, v in first["loss"].items() if v.is_floating_point()}
    for name, value in proxies.items():
        assert value.shape == first["loss"][name].shape and torch.isfinite(value).all()
        assert not torch.equal(value, first["loss"][name])
    loss_group = second["optimizer"]["param_groups"][-1]
    for index in loss_group["params"]:
        assert int(second["optimizer"]["state"][index]["step"]) == steps_two + steps_one

    # the schedule ends on its last step: the cosine reaches its floor at the end of epoch 2
    for group in second["optimizer"]["param_groups"]:
        assert group["lr"] == pytest.approx(group["initial_lr"] * MIN_LR_RATIO, rel=1e-6)
