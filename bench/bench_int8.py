"""INT8 vs fp32 export of one trained run: images/s and test-class retrieval, float and binary.

Exports the run twice through ``retrieval export``'s own code (fp32, and ``--quantize int8`` with its
validation check), then, in this one process:
- images/s of ``OnnxEmbedder.embed_arrays`` on the same preprocessed test images (same batch, same
  threads), one session at a time, the models taking turns, median of ``--repeats`` rounds of 3
  batches, with onnxruntime's threads spinning between operators (the embedder's default) and
  sleeping (the service's default);
- MAP@R, R@1 (= P@1) of the test classes as ``retrieval eval --model`` measures them, float (inner
  product) and binary (sign bits, Hamming).

    nice -n 10 python bench/bench_int8.py --run runs/cars196 --work /tmp/int8_bench
    python bench/bench_int8.py --run runs/cars196 --work /tmp/int8_bench --reuse   # skip the exports
    ... --compare OLD_EXPORT_DIR   # one more model measured in the same run (e.g. an earlier fp32 export)
    python bench/bench_int8.py     # no run: a random-weights stand-in (bench/stand_in_run.py), speeds only
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from quick_mode import parse_quick


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a trained run directory (default: a random-weights stand-in)")
    parser.add_argument("--work", type=Path, help="where the two exports are written (default: a temporary folder)")
    parser.add_argument("--data", type=Path, help="the run's dataset, if not at config.yaml's data.path")
    parser.add_argument("--reuse", action="store_true", help="use the exports already in --work")
    parser.add_argument("--compare", type=Path, nargs="*", default=[], help="more export dirs to time")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="timed rounds (each model and spin setting: a fresh session, 3 timed batches)",
    )
    parser.add_argument("--no-quality", action="store_true", help="time only; skip the test-class metrics")
    return parse_quick(parser, batch=8, repeats=1)


def export_both(args: argparse.Namespace) -> dict[str, Path]:
    from retrieval.training.export.int8_export import Int8Request
    from retrieval.training.export.run_export import export_run

    dirs = {"fp32": args.work / "fp32", "int8": args.work / "int8"}
    if not args.reuse:
        export_run(args.run, dirs["fp32"])
        started = time.perf_counter()
        request = Int8Request(data_path=args.data, progress=False, force=args.stand_in)  # stand-in: check not enforced
        result = export_run(args.run, dirs["int8"], int8=request)
        check = result.manifest.quantization.check if result.manifest.quantization else None
        print(f"int8 export (calibration + validation check): {time.perf_counter() - started:.0f} s; check {check}")
    return dirs


def test_records(args: argparse.Namespace) -> list:
    from retrieval.training.data_pipeline.run_data import prepare_run_data
    from retrieval.training.run.outputs.run_dir import load_run_config

    data = load_run_config(args.run).data
    data = data.model_copy(update={"path": args.data or data.path})
    return prepare_run_data(data, progress=False).splits.test


SPIN_SETTINGS = (True, False)
"""onnxruntime's threads spinning between operators (the embedder's default) or sleeping."""


def time_models(models: dict[str, Path], batch: np.ndarray, args: argparse.Namespace) -> dict[tuple[str, bool], float]:
    """Median images/s of each model under each spin setting, taking turns in every round.

    Only one session exists at a time (made, warmed up, timed over 3 batches, closed): an idle
    session's spinning threads would take the 2 cores from the session being timed, which is how
    an earlier version of this bench, with every session open at once, measured INT8 at 1.8x.
    """
    from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder

    rates: dict[tuple[str, bool], list[float]] = {}
    for _ in range(args.repeats):
        for name, path in models.items():
            for spin in SPIN_SETTINGS:
                embedder = OnnxEmbedder(path, threads=args.threads, providers="cpu", spin_wait=spin)
                embedder.embed_arrays(batch)  # warm-up
                for _ in range(3):
                    started = time.perf_counter()
                    embedder.embed_arrays(batch)
                    rates.setdefault((name, spin), []).append(len(batch) / (time.perf_counter() - started))
                del embedder
                gc.collect()
    return {key: statistics.median(values) for key, values in rates.items()}


def first_batch(records: list, model_dir: Path, size: int) -> np.ndarray:
    from retrieval.indexing.data.image_io import open_rgb
    from retrieval.indexing.exported_model.model_manifest import ModelManifest
    from retrieval.indexing.exported_model.preprocess import preprocess_image

    prep = ModelManifest.load(model_dir).preprocessing
    chosen = records[:: max(1, len(records) // size)][:size]
    return np.stack([preprocess_image(open_rgb(r.path), prep) for r in chosen])


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        args.stand_in = args.run is None
        if args.stand_in:
            from stand_in_run import NOTICE, stand_in_run

            print(NOTICE)
            args.run, args.data = stand_in_run(Path(scratch) / "stand-in", args.quick)
        args.work = args.work or Path(scratch) / "work"
        measure(args)


def measure(args: argparse.Namespace) -> None:
    dirs = export_both(args)
    models = {"fp32": dirs["fp32"], "int8": dirs["int8"], **{str(path): path for path in args.compare}}
    records = test_records(args)
    rates = time_models(models, first_batch(records, dirs["fp32"], args.batch), args)
    quality = {} if args.no_quality else measure_quality(dirs, records, args)
    print(
        f"\n{args.run}: {len(records)} test images; batch {args.batch}, {args.threads} threads, "
        f"median of {args.repeats} rounds x 3 batches, load average {os.getloadavg()[0]:.1f}\n"
    )
    print(
        "| model | images/s | vs fp32 | images/s, threads sleeping | vs fp32 | MB "
        "| test MAP@R float | R@1 float | MAP@R binary | R@1 binary |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, path in models.items():
        size = (path / "model.onnx").stat().st_size / 1e6
        cells = quality.get(name)
        scores = " | ".join(f"{v:.4f}" for v in cells) if cells else "- | - | - | -"
        speeds = " | ".join(
            f"{rates[name, spin]:.1f} | {rates[name, spin] / rates['fp32', spin]:.2f}x" for spin in SPIN_SETTINGS
        )
        print(f"| {name} | {speeds} | {size:.1f} | {scores} |")
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
