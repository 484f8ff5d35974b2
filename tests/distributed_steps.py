"""Run a few trainer steps on one fixed global batch, as rank r of N (under torchrun) or alone.

Used by tests/test_distributed_equivalence.py: ``python distributed_steps.py DATA OUT LOSS``.
Each process trains on its slice of the same global batch and saves its model and loss state.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from retrieval.training.config.train_config import build_config
from retrieval.training.run.fitting.distributed import DistContext
from retrieval.training.run.fitting.trainer import Trainer

GLOBAL_BATCH = 8
STEPS = int(os.environ.get("DIST_STEPS", "3"))


def main(data: Path, out: Path, loss: str) -> None:
    ctx = DistContext.from_environment()
    size = GLOBAL_BATCH // ctx.world_size  # trainer.batch_size is per process
    cfg = build_config(
        [
            (
                "test",
                {
                    "data": {
                        "path": str(data),
                        "image_size": 16,
                        "num_workers": 0,
                        "val_fraction": 0.25,
                        "images_per_class": 2,
                    },
                    "model": {"backbone": "resnet18", "embedding_dim": 8, "freeze_batchnorm": True},
                    "loss": {"name": loss},
                    "optimizer": {"name": "sgd", "lr": 0.05},
                    "trainer": {"epochs": 1, "batch_size": size, "device": "cpu", "seed": 0},
                },
            )
        ]
    )
    trainer = Trainer(cfg, out / f"run{ctx.rank}", progress=False, ctx=ctx)
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(GLOBAL_BATCH, 3, 16, 16, generator=generator)
    labels = torch.arange(GLOBAL_BATCH // 2).repeat_interleave(2)
    part = slice(ctx.rank * size, (ctx.rank + 1) * size)
    for step in range(STEPS):
        trainer._step(images[part], labels[part], 1, step)
    state = {"model": trainer.model.state_dict(), "loss": trainer.loss.state_dict()}
    torch.save(state, out / f"rank{ctx.rank}_of{ctx.world_size}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
