"""INT8 vs fp32 export of one trained run: images/s and test-class retrieval, float and binary.

Exports the run twice through ``retrieval export``'s own code (fp32, and ``--quantize int8`` with its
validation check), then, in this one process:
- images/s of ``OnnxEmbedder.embed_arrays`` on the same preprocessed test images (same batch, same
  threads), the models taking turns, median of ``--repeats`` rounds;
- MAP@R, R@1 (= P@1) of the test classes as ``retrieval eval --model`` measures them, float (inner
  product) and binary (sign bits, Hamming).

    nice -n 10 python bench/bench_int8.py --run runs/caltech_b --work /tmp/int8_bench
    python bench/bench_int8.py --run runs/caltech_b --work /tmp/int8_bench --reuse   # skip the exports
    ... --compare OLD_EXPORT_DIR   # one more model measured in the same run (e.g. an earlier fp32 export)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a trained run directory")
    parser.add_argument("--work", type=Path, required=True, help="where the two exports are written")
    parser.add_argument("--data", type=Path, help="the run's dataset, if not at config.yaml's data.path")
    parser.add_argument("--reuse", action="store_true", help="use the exports already in --work")
    parser.add_argument("--compare", type=Path, nargs="*", default=[], help="more export dirs to time")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (each model runs one batch per round)")
    parser.add_argument("--no-quality", action="store_true", help="time only; skip the test-class metrics")
    return parser.parse_args()


def export_both(args: argparse.Namespace) -> dict[str, Path]:
    from retrieval.training.export import export_run
    from retrieval.training.int8_export import Int8Request

    dirs = {"fp32": args.work / "fp32", "int8": args.work / "int8"}
    if not args.reuse:
        export_run(args.run, dirs["fp32"])
        started = time.perf_counter()
        result = export_run(args.run, dirs["int8"], int8=Int8Request(data_path=args.data, progress=False))
        check = result.manifest.quantization.check if result.manifest.quantization else None
        print(f"int8 export (calibration + validation check): {time.perf_counter() - started:.0f} s; check {check}")
    return dirs


def test_records(args: argparse.Namespace) -> list:
    from retrieval.training.run_data import prepare_run_data
    from retrieval.training.run_dir import load_run_config

    data = load_run_config(args.run).data
    data = data.model_copy(update={"path": args.data or data.path})
    return prepare_run_data(data, progress=False).splits.test


def time_models(models: dict[str, Path], batch: np.ndarray, args: argparse.Namespace) -> dict[str, float]:
    """Median images/s of each model, the models taking turns within every round."""
    from retrieval.indexing.model.onnx_embedder import OnnxEmbedder

    embedders = {name: OnnxEmbedder(path, threads=args.threads, providers="cpu") for name, path in models.items()}
    for embedder in embedders.values():
        embedder.embed_arrays(batch)  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in embedders}
    for _ in range(args.repeats):
        for name, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed_arrays(batch)
            rates[name].append(len(batch) / (time.perf_counter() - started))
    return {name: statistics.median(values) for name, values in rates.items()}


def first_batch(records: list, model_dir: Path, size: int) -> np.ndarray:
    from retrieval.indexing.data.image_io import open_rgb
    from retrieval.indexing.model.manifest import ModelManifest
    from retrieval.indexing.model.preprocess import preprocess_image

    prep = ModelManifest.load(model_dir).preprocessing
    chosen = records[:: max(1, len(records) // size)][:size]
    return np.stack([preprocess_image(open_rgb(r.path), prep) for r in chosen])


def main() -> None:
    args = parse_args()
    dirs = export_both(args)
    models = {"fp32": dirs["fp32"], "int8": dirs["int8"], **{str(path): path for path in args.compare}}
    records = test_records(args)
    rates = time_models(models, first_batch(records, dirs["fp32"], args.batch), args)
    quality = {} if args.no_quality else measure_quality(dirs, records, args)
    print(
        f"\n{args.run}: {len(records)} test images; batch {args.batch}, {args.threads} threads, "
        f"median of {args.repeats} rounds, load average {os.getloadavg()[0]:.1f}\n"
    )
    print("| model | images/s | vs fp32 | MB | test MAP@R float | R@1 float | MAP@R binary | R@1 binary |")
    print("|---|---|---|---|---|---|---|---|")
    for name, path in models.items():
        size = (path / "model.onnx").stat().st_size / 1e6
        cells = quality.get(name)
        scores = " | ".join(f"{v:.4f}" for v in cells) if cells else "- | - | - | -"
        print(f"| {name} | {rates[name]:.1f} | {rates[name] / rates['fp32']:.2f}x | {size:.1f} | {scores} |")
    if quality:
        drops = [100 * (a - b) for a, b in zip(quality["fp32"], quality["int8"])]
        print(
            f"\nINT8 loses {drops[0]:.2f} points of MAP@R float, {drops[2]:.2f} binary (R@1: {drops[1]:.2f}, {drops[3]:.2f})"
        )


def measure_quality(dirs: dict[str, Path], records: list, args: argparse.Namespace) -> dict[str, list[float]]:
    from retrieval.indexing.eval.evaluation import evaluate_model

    quality = {}
    for name in ("fp32", "int8"):
        report, _ = evaluate_model(dirs[name], records, threads=args.threads, progress=False)
        metrics = report.metrics
        quality[name] = [
            metrics["float"].map_at_r,
            metrics["float"].precision_at_1,
            metrics["binary"].map_at_r,
            metrics["binary"].precision_at_1,
        ]
    return quality


if __name__ == "__main__":
    main()
