"""Under torchrun, N ranks x B images train exactly like 1 process x N*B images.

Two gloo processes each take half of one fixed global batch; one plain process takes all of it.
After a few steps the loss parameters (proxies, the margin loss's beta) are identical on both
ranks, and the model and loss parameters equal the single process's (frozen BatchNorm, so batch
statistics do not differ by construction). Before the fix, ranks initialised proxies with
different seeds, never synchronised them, and pair losses got 1/N of the gradient.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from launching import torchrun_prefix

SCRIPT = Path(__file__).resolve().parent / "distributed_steps.py"


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def _single_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["proxy_anchor", "margin"])
def test_two_ranks_equal_one_process_on_the_global_batch(loss: str, synth_data: Path, tmp_path: Path) -> None:
    env = _single_env() | {"OMP_NUM_THREADS": "1"}
    _run([sys.executable, str(SCRIPT), str(synth_data), str(tmp_path), loss], env)
    _run([*torchrun_prefix(2), str(SCRIPT), str(synth_data), str(tmp_path), loss], env)
    single = torch.load(tmp_path / "rank0_of1.pt", weights_only=True)
    ranks = [torch.load(tmp_path / f"rank{r}_of2.pt", weights_only=True) for r in range(2)]
    assert ranks[0]["loss"] and ranks[0]["loss"].keys() == ranks[1]["loss"].keys()
    for name, value in ranks[0]["loss"].items():
        assert torch.equal(value, ranks[1]["loss"][name]), f"{name} differs between ranks"
        torch.testing.assert_close(value, single["loss"][name], atol=1e-5, rtol=1e-4)
    for name, value in ranks[0]["model"].items():
        torch.testing.assert_close(value, single["model"][name], atol=1e-5, rtol=1e-4, msg=name)
    moved = [n for n, v in single["model"].items() if v.is_floating_point() and "head" in n]
    assert moved  # the comparison covers the trained head
