"""What a backbone costs on this CPU, random weights (speed does not depend on the values): the table of
docs/results.md, "Vision transformers: cost on this CPU".

Per backbone, in a fresh process each (so peak RSS is that backbone's alone):
- embedding images/s at batch ``--batch`` through onnxruntime, the fp32 export (``onnx_export_bytes``, what
  ``retrieval export`` writes) and the INT8 one (``quantize_int8``, calibrated on one random batch);
- training images/s at batch ``--train-batch``: a step is forward, a classification loss on the embedding,
  backward and an AdamW step; "frozen" runs the first half of the trunk's stages (``model.frozen_stages``)
  in onnxruntime without gradients (``FrozenPrefix``), as training on the CPU does;
- peak RSS of the process and the fp32 / INT8 ONNX file sizes.
Idle threads sleep (``OMP_WAIT_POLICY=PASSIVE``, as ``retrieval`` sets it): spinning, they take the cores from
the training step on a shared machine and make it several times slower.

    nice -n 10 python bench/bench_vit_cost.py [--backbones dinov2_vits14 clip_vitb16] [--image-size 224]

One warm-up run, then ``--repeats`` timed runs, median. The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from retrieval.cli.thread_env import apply_thread_env_defaults

apply_thread_env_defaults()  # idle threads sleep, as in every `retrieval` command (before numpy and torch load)

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
from quick_mode import parse_quick  # noqa: E402

from retrieval.training.config.train_config import ModelConfig  # noqa: E402
from retrieval.training.export.int8_quantization import quantize_int8  # noqa: E402
from retrieval.training.export.onnx_export import INPUT_NAME, onnx_export_bytes  # noqa: E402
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model  # noqa: E402
from retrieval.training.model.trunks.trunk_stages import trunk_stages  # noqa: E402
from retrieval.training.run.inputs.frozen_prefix import FrozenPrefix  # noqa: E402


def _median_seconds(run: Callable[[], object], repeats: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _embedding_rate(onnx: bytes, images: np.ndarray, repeats: int) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as FrozenPrefix's sessions
    session = ort.InferenceSession(onnx, options, providers=["CPUExecutionProvider"])
    return len(images) / _median_seconds(lambda: session.run(None, {INPUT_NAME: images}), repeats)


def _training_rate(model: EmbeddingModel, size: int, batch: int, repeats: int) -> float:
    classes = 8
    classifier = torch.nn.Linear(model.embedding_dim, classes)
    optimizer = torch.optim.AdamW([*model.parameters(), *classifier.parameters()], lr=1e-5)
    prefix = FrozenPrefix(model, torch.device("cpu")) if model.frozen_stages else None
    images, labels = torch.randn(batch, 3, size, size), torch.arange(batch) % classes
    model.train()

    def step() -> None:
        inputs = prefix(images) if prefix is not None else images
        embeddings = model(inputs, start_stage=model.frozen_stages)
        loss = torch.nn.functional.cross_entropy(classifier(embeddings) / 0.05, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return batch / _median_seconds(step, repeats)


def measure(backbone: str, size: int, batch: int, train_batch: int, repeats: int) -> dict[str, float | str]:
    torch.manual_seed(0)
    config = ModelConfig(backbone=backbone, pooling="mean", embedding_dim=512)
    model = build_embedding_model(config, image_size=size).eval()
    stages = len(trunk_stages(model.backbone))
    images = np.random.default_rng(0).standard_normal((batch, 3, size, size)).astype(np.float32)
    fp32 = onnx_export_bytes(model, size)
    int8 = quantize_int8(fp32, INPUT_NAME, [images[:8]]).onnx_bytes
    row: dict[str, float | str] = {
        "backbone": backbone,
        "parameters_m": sum(p.numel() for p in model.backbone.parameters()) / 1e6,
        "fp32_images_s": _embedding_rate(fp32, images, repeats),
        "int8_images_s": _embedding_rate(int8, images, repeats),
        "fp32_mb": len(fp32) / 1e6,
        "int8_mb": len(int8) / 1e6,
        "train_images_s": _training_rate(model, size, train_batch, repeats),
    }
    frozen = build_embedding_model(config.model_copy(update={"frozen_stages": stages // 2}), image_size=size)
    row["frozen_stages"] = f"{stages // 2} of {stages}"
    row["train_frozen_images_s"] = _training_rate(frozen, size, train_batch, repeats)
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbones", nargs="+", default=["dinov2_vits14", "clip_vitb16"])
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--train-batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # measure this backbone here, print a JSON row
    args = parse_quick(parser, backbones=["dinov2_vits14"], image_size=28, batch=2, train_batch=2, repeats=1)
    if args.one:
        print(json.dumps(measure(args.one, args.image_size, args.batch, args.train_batch, args.repeats)))
        return
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.image_size} px")
    print(
        "| backbone | params | embed fp32 img/s | embed INT8 img/s | train img/s | train, frozen prefix | "
        "peak RSS MB | ONNX fp32 / INT8 MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for backbone in args.backbones:
        command = [sys.executable, __file__, "--one", backbone, "--image-size", str(args.image_size)]
        command += ["--batch", str(args.batch), "--train-batch", str(args.train_batch), "--repeats", str(args.repeats)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {backbone} | {r['parameters_m']:.1f}M | {r['fp32_images_s']:.1f} | {r['int8_images_s']:.1f} | "
            f"{r['train_images_s']:.1f} | {r['train_frozen_images_s']:.1f} ({r['frozen_stages']} stages) | "
            f"{r['peak_rss_mb']:.0f} | {r['fp32_mb']:.0f} / {r['int8_mb']:.0f} |",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
