"""Training throughput on the CPU: resnet18, 224 px, batch 32.

Prints a table of images/s for (a) the bare model step on a tensor already in memory
(the compute ceiling, measured in the same run) and (b) the real trainer step through
the data pipeline (JPEG decode + augmentation in DataLoader workers), with the share of
step time spent waiting for data. The ratio (b)/(a) is what the pipeline costs.

    python bench/bench_training_throughput.py [--steps 15] [--workers 2] [--loss normalized_softmax]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import build_config
from retrieval.training.losses import build_loss
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.run.trainer import Trainer


def bare_step_rate(cfg, steps: int) -> float:
    model = build_embedding_model(cfg.model).to(memory_format=torch.channels_last)
    loss = build_loss(cfg.loss.name, num_classes=20, embedding_dim=model.embedding_dim, params=cfg.loss.params)
    optimizer = torch.optim.AdamW(list(model.parameters()) + list(loss.parameters()), lr=1e-4)
    images = torch.randn(cfg.trainer.batch_size, 3, 224, 224).contiguous(memory_format=torch.channels_last)
    labels = torch.arange(cfg.trainer.batch_size) % 8
    for step in range(steps + 2):
        if step == 2:
            started = time.perf_counter()
        optimizer.zero_grad()
        loss(model(images), labels).backward()
        optimizer.step()
    return steps * cfg.trainer.batch_size / (time.perf_counter() - started)


def trainer_rate(cfg, run_dir: Path) -> tuple[float, float]:
    Trainer(cfg, run_dir, progress=False).fit()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    return last["images_per_second"], last["data_wait_fraction"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--loss", default="normalized_softmax")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        generate_synthetic_dataset(data, classes=20, per_class=40, size=256, seed=0, progress=False)
        cfg = build_config(
            [
                ("recipe", recipe(args.loss)),
                (
                    "bench",
                    {
                        "data": {
                            "path": str(data),
                            "image_size": 224,
                            "num_workers": args.workers,
                            "val_fraction": 0.0,
                        },
                        "model": {"backbone": "resnet18", "embedding_dim": 512},
                        "trainer": {
                            "epochs": 1,
                            "batch_size": 32,
                            "device": "cpu",
                            "max_steps_per_epoch": args.steps,
                            "warm_start_epochs": 0,
                            "evaluate_untrained_test": False,
                        },
                    },
                ),
            ]
        )
        bare = bare_step_rate(cfg, args.steps)
        real, wait = trainer_rate(cfg, Path(tmp) / "run")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, loss {args.loss}, workers {args.workers}\n")
    print("| path | images/s | vs bare step | data wait share |")
    print("|---|---|---|---|")
    print(f"| bare step (tensor in memory) | {bare:.1f} | 1.00x | - |")
    print(f"| trainer (decode + augment + step) | {real:.1f} | {real / bare:.2f}x | {wait:.1%} |")


if __name__ == "__main__":
    sys.exit(main())
