"""What the service's query decode costs, and what its shortcuts do to the embeddings and to MAP@R.

The variants are ``query_pipeline.decode_query`` under the serving settings that choose the path: **exact**
(``draft_decode`` and ``region_resize`` off: a full decode and torchvision's resize-then-crop, what
``retrieval index build`` does to the gallery), **draft** (the JPEG decoded at 1/2, 1/4 or 1/8 scale while its
shorter side still covers the model's resize: the service's default) and **draft + region** (only the crop's
region resized as well).

Part 1: CPU ms per image of each variant (median of ``--repeats``) on a 500 x 375 and a 4032 x 3024 JPEG made
from the first test photo. Part 2: the test split of ``--data`` searched against its own exact embeddings (the
gallery as ``index build`` makes it, each query's own item left out) with queries uploaded as JPEGs ``x`` times
the photo's size (``--upscale``, bicubic, quality 90: x1 is the file itself; the shared cars196's photos are at
most 256 px, too small for the draft to act at x1, so x4, x8 and x16 make the draft decode at 1/2, 1/4 and 1/8;
an upscaled photo is smoother than a real large one): MAP@R and R@1 per variant, and the largest cosine distance
of a query's embedding from the exact variant's of the same upload.

    python bench/bench_query_decode.py --model RUN_OR_EXPORT --data ../shared/data/cars196 [--upscale 1 4 16]
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from given_run import model_and_data
from PIL import Image
from quick_mode import parse_quick

from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.eval.metrics import evaluate_embeddings
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.serving.query_pipeline import decode_query
from retrieval.serving.settings import ServeSettings

VARIANTS = {
    "exact (full decode, whole resize)": {"draft_decode": False, "region_resize": False},
    "draft decode (the default)": {"draft_decode": True, "region_resize": False},
    "draft decode + region resize": {"draft_decode": True, "region_resize": True},
}
BATCH = 32


def decoder(embedder: OnnxEmbedder, flags: dict[str, bool]) -> Callable[[bytes], np.ndarray]:
    settings = ServeSettings(index_dir=".", **flags)  # type: ignore[arg-type]
    prep = embedder.manifest.preprocessing
    return lambda data: decode_query(data, "query", settings, prep)


def jpeg_of(image: Image.Image, size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    image.resize(size, Image.Resampling.BICUBIC).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def cpu_ms(work: Callable[[], object], repeats: int) -> float:
    work()
    samples = []
    for _ in range(repeats):
        started = time.process_time()
        work()
        samples.append((time.process_time() - started) * 1000.0)
    return float(np.median(samples))


def cost_rows(embedder: OnnxEmbedder, photo: Image.Image, repeats: int) -> list[str]:
    jpegs = [jpeg_of(photo, size) for size in ((500, 375), (4032, 3024))]
    rows = []
    for name, flags in VARIANTS.items():
        decode = decoder(embedder, flags)
        costs = [cpu_ms(lambda data=data, decode=decode: decode(data), repeats) for data in jpegs]  # type: ignore[misc]
        rows.append(f"| {name} | " + " | ".join(f"{cost:.2f}" for cost in costs) + " |")
    return rows


def embedded(embedder: OnnxEmbedder, files: Sequence[bytes], factor: int) -> dict[str, np.ndarray]:
    """Each variant's embeddings of ``files`` uploaded ``factor`` times larger (a batch at a time: a JPEG of
    x4 is a few MB)."""
    decoders = {name: decoder(embedder, flags) for name, flags in VARIANTS.items()}
    out: dict[str, list[np.ndarray]] = {name: [] for name in VARIANTS}
    for start in range(0, len(files), BATCH):
        queries = [upscaled(data, factor) for data in files[start : start + BATCH]]
        for name, decode in decoders.items():
            out[name].append(embedder.embed_arrays(np.stack([decode(data) for data in queries])))
    return {name: np.concatenate(parts) for name, parts in out.items()}


def upscaled(data: bytes, factor: int) -> bytes:
    if factor == 1:
        return data
    image = Image.open(io.BytesIO(data)).convert("RGB")
    return jpeg_of(image, (image.width * factor, image.height * factor))


def quality_rows(embedder: OnnxEmbedder, files: list[bytes], labels: np.ndarray, factors: list[int]) -> list[str]:
    """The gallery: the files' exact embeddings (as ``index build`` makes them); each query's own item left out."""
    gallery = embedded(embedder, files, 1)[next(iter(VARIANTS))]
    own = np.arange(len(files))
    rows = []
    for factor in factors:
        variants = embedded(embedder, files, factor)
        exact = variants[next(iter(VARIANTS))]
        for name, vectors in variants.items():
            metrics = evaluate_embeddings(
                vectors, labels, gallery, labels, query_gallery_ids=own, ks=(1,), compute_nmi=False
            )
            distance = float(1.0 - np.min(np.sum(vectors * exact, axis=1)))
            rows.append(
                f"| x{factor} | {name} | {100 * metrics.map_at_r:.2f} | {100 * metrics.recall_at_k[1]:.2f} "
                f"| {distance:.2e} |"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a run or an export (default: a random-weights stand-in)")
    parser.add_argument("--data", default=None, help="an ImageFolder dataset; its test split is searched")
    parser.add_argument("--upscale", type=int, nargs="+", default=[1, 4, 16], help="query JPEGs at these sizes")
    parser.add_argument("--every", type=int, default=1, help="use every n-th test image (a faster run)")
    parser.add_argument("--repeats", type=int, default=30)
    args = parse_quick(parser, upscale=[1, 4], repeats=2)
    with model_and_data(args):
        embedder = OnnxEmbedder(resolve_export_dir(Path(args.model)), threads=2)
        records = select_split(load_records(args.data), "test")[:: args.every]
        files = [record.path.read_bytes() for record in records]
        labels = np.asarray([record.label for record in records])
        costs = cost_rows(embedder, Image.open(records[0].path).convert("RGB"), args.repeats)
        quality = quality_rows(embedder, files, labels, args.upscale)
    print(f"model {embedder.model_sha256[:12]} ({args.model}), data {args.data}: {len(files)} test images")
    print("| variant | CPU ms, 500 x 375 JPEG | CPU ms, 4032 x 3024 JPEG |\n|---|---|---|")
    print("\n".join(costs))
    print(
        "\n| query size | variant | MAP@R % | R@1 % | largest cosine distance from the exact variant |\n|---|---|---|---|---|"
    )
    print("\n".join(quality))


if __name__ == "__main__":
    main()
