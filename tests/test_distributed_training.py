"""torchrun readiness: two CPU processes (gloo) train one run; rank 0 alone writes the run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from launching import torchrun_prefix

from retrieval.training.run.fitting.distributed import DistContext, broadcast_from_main, gather_with_grad


def test_single_process_helpers_are_identity() -> None:
    ctx = DistContext.single()
    tensor = torch.ones(3, requires_grad=True)
    assert gather_with_grad(tensor, ctx) is tensor
    assert broadcast_from_main({"a": 1}, ctx) == {"a": 1}
    assert ctx.is_main and not ctx.enabled


@pytest.mark.slow
def test_two_ranks_train_a_pair_loss_with_gathered_embeddings(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    command = [
        *torchrun_prefix(2),
        str(Path(sys.executable).parent / "retrieval"),
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
        "16",
        "--epochs",
        "2",
        "--batch-size",
        "8",
        "--images-per-class",
        "2",
        "--max-steps-per-epoch",
        "2",
        "--workers",
        "0",
        "--device",
        "cpu",
        "--quiet",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("run directory:") == 1  # only rank 0 reports
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [0, 1, 2]  # one log, not one per rank
    assert rows[-1]["global_step"] == 4
    # the best epoch is the one with the highest validation MAP@R, epoch 0 (the starting backbone) included
    best = max(rows, key=lambda row: (row["val"]["map_at_r"], -row["epoch"]))["epoch"]
    assert json.loads((run / "test_metrics.json").read_text())["best_epoch"] == best
