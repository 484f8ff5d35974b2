"""OnnxEmbedder images/s against torch eager on the same model (this benchmark may import torch).

A randomly initialised torchvision resnet18 (no weights are downloaded) with an L2-normalised
512-d output is exported the way ``retrieval export`` does (opset 17, dynamic batch), then
both run on identical preprocessed batches (batch 32, 224 px) with the same thread count.
With ``--images DIR`` the full ``embed_paths`` pipeline (decode + preprocess + inference,
decoding overlapped in threads) is timed too, on real JPEGs.

    python bench/bench_embedder.py            # about a minute on 2 cores
    python bench/bench_embedder.py --images ../shared/data/cars196 --paths 256
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from quick_mode import parse_quick


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--batches", type=int, default=4, help="timed batches per engine")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=224, help="the model's input size in px")
    parser.add_argument(
        "--images", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "cars196"
    )
    parser.add_argument("--paths", type=int, default=128, help="images of the full-pipeline measurement")
    return parse_quick(parser, batch=4, batches=1, paths=8, image_size=64)


def images_per_second(run, batch, batches: int) -> float:
    run(batch)  # warm-up
    started = time.perf_counter()
    for _ in range(batches):
        run(batch)
    return batches * len(batch) / (time.perf_counter() - started)


def main() -> None:
    args = parse_args()
    import numpy as np
    import torch

    from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        from bench_models import export_resnet18

        model = export_resnet18(Path(tmp), image_size=args.image_size)
        embedder = OnnxEmbedder(Path(tmp), threads=args.threads, providers="cpu")
        batch = np.random.default_rng(0).standard_normal(
            (args.batch, 3, args.image_size, args.image_size), dtype=np.float32
        )
        with torch.inference_mode():
            reference = model(torch.from_numpy(batch)).numpy()
            torch_ips = images_per_second(lambda b: model(torch.from_numpy(b)), batch, args.batches)
        onnx_ips = images_per_second(embedder.embed_arrays, batch, args.batches)
        max_diff = float(np.abs(embedder.embed_arrays(batch) - reference).max())
        pipeline = full_pipeline(embedder, args)
    print(
        f"torch {torch.__version__}, onnxruntime providers {embedder.providers}, {args.threads} threads, "
        f"batch {args.batch}, {args.image_size} px, load average {os.getloadavg()[0]:.1f}\n"
    )
    print("| engine (resnet18, fp32) | images/s | vs torch eager |")
    print("|---|---|---|")
    print(f"| torch eager | {torch_ips:.1f} | 1.00x |")
    print(f"| OnnxEmbedder.embed_arrays | {onnx_ips:.1f} | {onnx_ips / torch_ips:.2f}x |")
    if pipeline:
        print(
            f"| OnnxEmbedder.embed_paths ({pipeline[1]} JPEGs: decode + preprocess + inference) | "
            f"{pipeline[0]:.1f} | {pipeline[0] / torch_ips:.2f}x |"
        )
    print(f"\nmax abs difference ONNX vs torch: {max_diff:.2e}")


def full_pipeline(embedder, args: argparse.Namespace) -> tuple[float, int] | None:
    if not args.images.is_dir():
        return None
    paths = sorted(args.images.glob("*/*.jpg"))[::7][: args.paths]
    embedder.embed_paths(paths[: args.batch], batch_size=args.batch, progress=False)  # warm-up
    started = time.perf_counter()
    result = embedder.embed_paths(paths, batch_size=args.batch, progress=False)
    return len(result.ok) / (time.perf_counter() - started), len(paths)


if __name__ == "__main__":
    main()
