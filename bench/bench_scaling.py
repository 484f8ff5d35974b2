"""The numbers docs/scaling.md projects to 100M images: one shard job's images/s and the bytes and
seconds per item of every file a merged index holds (this benchmark may import torch).

1. Embedding: a random-weights resnet50 (2048-d, 224 px) exported like ``retrieval export``; the
   whole ``index build --shard 0/1`` (decode + preprocess + inference + shard files) against pure
   inference (``OnnxEmbedder.embed_arrays`` on ready batches, the baseline) in the same run, then
   ``index merge`` of that shard.
2. Storage: N random unit 2048-d vectors written by the index's own writers (float16 rows, faiss
   files of each kind, the SQLite item table with realistic paths, labels and metadata).

    python bench/bench_scaling.py                      # ~2 minutes on 2 cores
    python bench/bench_scaling.py --items 200000 --images 256
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from quick_mode import parse_quick


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000, help="vectors of the storage measurement")
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--images", type=int, default=64, help="JPEGs of the embedding measurement (0: skip)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--arch", choices=("resnet50", "resnet18"), default="resnet50", help="the embedding model")
    parser.add_argument("--image-size", type=int, default=224, help="the model's input size in px")
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "cars196"
    )
    return parse_quick(parser, items=500, dim=64, images=8, arch="resnet18", image_size=64)


def gallery(args: argparse.Namespace, tmp: Path) -> Path:
    """A folder of ``--images`` JPEGs: Caltech-101's where present (ImageFolder), else generated 500x375 ones."""
    from PIL import Image

    root = tmp / "gallery"
    sources = sorted(args.data.glob("*/*.jpg"))[:: max(1, len(sorted(args.data.glob("*/*.jpg"))) // 997)]
    rng = np.random.default_rng(0)
    for i in range(args.images):
        folder = root / f"class_{i % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        if sources:
            Image.open(sources[i % len(sources)]).convert("RGB").save(folder / f"{i}.jpg")
        else:
            pixels = rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.jpg", quality=90)
    return root


def embedding_rows(args: argparse.Namespace, tmp: Path) -> list[tuple[str, str]]:
    from bench_models import export_resnet18

    from retrieval.indexing.data.sources import load_records
    from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
    from retrieval.indexing.store.build.shard_merge import merge_shards
    from retrieval.indexing.store.build.shards import ShardSpec, build_shard

    export_resnet18(tmp / "export", image_size=args.image_size, arch=args.arch)
    embedder = OnnxEmbedder(tmp / "export", threads=args.threads, providers="cpu")
    batch = np.random.default_rng(0).standard_normal((32, 3, args.image_size, args.image_size), dtype=np.float32)
    embedder.embed_arrays(batch[:4])  # warm-up
    started = time.perf_counter()
    embedder.embed_arrays(batch)
    inference = len(batch) / (time.perf_counter() - started)
    data = gallery(args, tmp)
    records = load_records(data)
    report = build_shard(
        tmp / "export", records, tmp / "shard", root=data, spec=ShardSpec(0, 1), threads=args.threads, progress=False
    )
    shard_rate = report.count / report.embed_seconds
    merged = merge_shards(tmp / "index", [tmp / "shard"])
    return [
        (f"{args.arch} inference, ready batches of 32 (baseline)", f"{inference:.1f} images/s (1.00x)"),
        (
            f"`index build --shard 0/1`, {report.count} JPEGs (decode + inference + files)",
            f"{shard_rate:.1f} images/s ({shard_rate / inference:.2f}x)",
        ),
        (f"`index merge` of that shard ({merged.count} items, flat kinds)", f"{merged.seconds:.2f} s"),
    ]


def storage_rows(args: argparse.Namespace, tmp: Path) -> list[tuple[str, str]]:
    import faiss

    from retrieval.indexing.data.records import ImageRecord
    from retrieval.indexing.search.binary import binarize
    from retrieval.indexing.store.files.faiss_kinds import (
        binary_kind,
        build_binary_index,
        build_float_index,
        float_kind,
    )
    from retrieval.indexing.store.files.segment_storage.segment_files import write_embeddings
    from retrieval.indexing.store.shared.items.items_db import ItemsDb

    n, rows = args.items, []
    vectors = np.random.default_rng(0).standard_normal((n, args.dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(1, n + 1, dtype=np.int64)

    def per_item(path: Path, seconds: float) -> str:
        return f"{path.stat().st_size / n:,.0f} B, {seconds / n * 1e6:.1f} us"

    started = time.perf_counter()
    write_embeddings(tmp, vectors)
    rows.append(
        ("embeddings.f16.npy (float16 rows)", per_item(tmp / "embeddings.f16.npy", time.perf_counter() - started))
    )
    for name, build, writer, kind in (
        ("float flat", build_float_index, faiss.write_index, float_kind("flat")),
        ("float ivfpq", build_float_index, faiss.write_index, float_kind("ivfpq")),
        ("binary flat (256-byte codes)", build_binary_index, faiss.write_index_binary, binary_kind("flat")),
        ("binary ivf", build_binary_index, faiss.write_index_binary, binary_kind("ivf")),
    ):
        started = time.perf_counter()
        data = vectors if name.startswith("float") else binarize(vectors, 0.0)
        index = build(kind, data, ids) if name.startswith("float") else build(kind, data, ids, args.dim)
        path = tmp / f"{name.split()[0]}-{kind.name}.faiss"
        writer(index, str(path))
        rows.append((f"{name} faiss file", per_item(path, time.perf_counter() - started)))
    records = [
        ImageRecord(Path(f"/data/gallery/class_{i % 10_000:05d}/img_{i:09d}.jpg"), f"class_{i % 10_000:05d}",
                    metadata={"shop": f"shop-{i % 50}"})
        for i in range(n)
    ]  # fmt: skip
    started = time.perf_counter()
    db = ItemsDb.create(tmp / "items.sqlite")
    with db.transaction():
        db.insert(records, range(n))
    db.close()
    rows.append(
        ("items.sqlite row (path, label, metadata)", per_item(tmp / "items.sqlite", time.perf_counter() - started))
    )
    return rows


def main() -> None:
    args = parse_args()
    print(f"{os.cpu_count()} cores (shared), {args.threads} threads, load average {os.getloadavg()[0]:.1f}\n")
    with tempfile.TemporaryDirectory() as tmp:
        if args.images:
            print(f"| embedding one shard ({args.arch}, {args.image_size} px) | rate |\n|---|---|")
            for name, value in embedding_rows(args, Path(tmp) / "embed"):
                print(f"| {name} | {value} |")
            print()
        print(f"| storage, {args.items:,} items x {args.dim}-d | bytes per item, write time per item |\n|---|---|")
        (Path(tmp) / "store").mkdir()
        for name, value in storage_rows(args, Path(tmp) / "store"):
            print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
