"""CPU training throughput: EfficientNet-Lite0 at 224 px, batch 32, through the real trainer.

Each row is one ``Trainer`` run on the same data, in this process, one after the other (the
baseline first, in the same run: the machine is noisy, compare ratios):

- full fine-tuning: every stage trains, images decoded and augmented by DataLoader workers;
- ``model.frozen_stages`` 4: the stem and the first three block stages frozen, run in onnxruntime
  without gradients (``training.run.frozen_prefix``), the rest trained on their activations;
- ``+ trainer.cached_views`` K: those activations made once for K augmented views per image
  (``training.run.activation_cache``); the epochs after that decode nothing.

Images/s is the trainer's own figure for an epoch (``metrics.jsonl``), steady state (the second
epoch); "per epoch incl. cache" spreads the cache's one-time cost over ``--epochs`` epochs.

    python bench/bench_training_throughput.py [--steps 20] [--epochs 10] [--views 8] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from quick_mode import parse_quick

from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import TrainConfig, build_config
from retrieval.training.run.fitting.trainer import Trainer


@dataclass(frozen=True)
class Variant:
    name: str
    layer: dict


VARIANTS = [
    Variant("full fine-tuning (baseline)", {}),
    Variant("frozen_stages 4 (onnxruntime prefix)", {"model": {"frozen_stages": 4}}),
    Variant("frozen_stages 4 + cached_views", {"model": {"frozen_stages": 4}, "trainer": {"cached_views": "VIEWS"}}),
]


def config(data: Path, variant: Variant, args: argparse.Namespace) -> TrainConfig:
    layer = json.loads(json.dumps(variant.layer).replace('"VIEWS"', str(args.views)))
    bench = {
        "data": {"path": str(data), "image_size": args.image_size, "num_workers": args.workers, "val_fraction": 0.0},
        "model": {"backbone": "efficientnet_lite0", "pretrained": args.pretrained or None, "freeze_batchnorm": True},
        "trainer": {
            "epochs": 2,
            "batch_size": args.batch,
            "device": "cpu",
            "max_steps_per_epoch": args.steps,
            "evaluate_untrained_test": False,
        },
    }
    return build_config([("recipe", recipe("normsoftmax")), ("bench", bench), ("variant", layer)])


def measure(cfg: TrainConfig, run_dir: Path) -> tuple[float, float, float]:
    """(images/s of the second epoch, data wait share, seconds spent outside the epochs' steps)."""
    started = time.perf_counter()
    Trainer(cfg, run_dir, progress=False, summary=False, evaluate_test=False).fit()
    total = time.perf_counter() - started
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps_s = sum(
        cfg.trainer.max_steps_per_epoch * cfg.trainer.batch_size / row["images_per_second"] for row in rows[1:]
    )
    return rows[-1]["images_per_second"], rows[-1]["data_wait_fraction"], total - steps_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch")
    parser.add_argument("--epochs", type=int, default=10, help="epochs the cache's one-time cost is spread over")
    parser.add_argument("--views", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data", type=Path, help="an ImageFolder of photos (default: generated 256 px images)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--pretrained", default="imagenet", help="the trunk's weights ('': random, as fast)")
    args = parse_quick(parser, steps=1, views=2, workers=0, batch=4, image_size=32, pretrained="")
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data
        if data is None:
            data = Path(tmp) / "data"
            per_class = max(
                2, -(-args.steps * args.batch // 40)
            )  # one epoch is the whole set: the cache holds what an epoch uses
            generate_synthetic_dataset(data, classes=40, per_class=per_class, size=256, seed=0, progress=False)
        results = [(v, measure(config(data, v, args), Path(tmp) / f"run{i}")) for i, v in enumerate(VARIANTS)]
    cpu = platform.processor() or platform.machine()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs ({cpu}), "
        f"workers {args.workers}, {args.steps} steps x {args.batch} images of {args.image_size} px per epoch, {args.views} cached views\n"
    )
    print("| variant | images/s (steady epoch) | vs baseline | data wait | one-time s | per epoch incl. one-time |")
    print("|---|---|---|---|---|---|")
    base = results[0][1][0]
    images = args.steps * args.batch
    for variant, (rate, wait, once) in results:
        effective = images / (images / rate + once / args.epochs)
        print(
            f"| {variant.name} | {rate:.1f} | {rate / base:.2f}x | {wait:.0%} | {once:.0f} | "
            f"{effective:.1f} ({effective / base:.2f}x) |"
        )


if __name__ == "__main__":
    sys.exit(main())
