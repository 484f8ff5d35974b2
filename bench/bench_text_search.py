"""Search by words over HTTP against its parts: the p50 of one-text ``POST /search`` (JSON ``text`` and the
form's ``text`` field, k=10) on a running service (uvicorn in a subprocess, as ``retrieval serve`` runs it)
against the p50 of what it must do, in this process: the text tower's encode (``TextEncoder.encode``: the
tokenizer and ``text.onnx``) plus the store's search of that vector. Target (issue 49): HTTP <= 1.5 x raw.

The text side is ``retrieval export``'s own (``text_model.py``: open_clip's ViT-B/32 text tower with random
weights, the exported graph and CLIP's tokenizer.json; fp32 ONNX), so the encode's cost is the real tower's;
the index holds a few generated images plus ``--items`` random 512-d vectors. Each query is a text of 3 to 8
words.

    python bench/bench_text_search.py               # 20,000 items, 100 queries per path
    python bench/bench_text_search.py --quick       # a smoke run: a 2-layer tower, 500 items
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import faiss
import httpx
import numpy as np
from quick_mode import parse_quick
from serving_server import THREADS, Variant, free_port, start_server
from text_model import QUICK_SHAPE, TowerShape, export_text_model, word

from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.text_encoder import text_encoder_of
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.usecases.vectors import add

K = 10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000, help="random vectors added to the index")
    parser.add_argument("--queries", type=int, default=100, help="one-text searches timed per path")
    parser.add_argument("--small-tower", action="store_true", help="a 2-layer tower instead of ViT-B/32's shape")
    return parse_quick(parser, items=500, queries=10, small_tower=True)


def texts(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(word(int(n)) for n in rng.integers(0, 1_000, rng.integers(3, 9))) for _ in range(count)]


def build(root: Path, shape: TowerShape, items: int) -> Path:
    model = export_text_model(root / "export", shape)
    generate_synthetic_dataset(root / "data", classes=2, per_class=5, size=48, progress=False)
    build_index(model, load_records(root / "data"), root / "index", progress=False)
    vectors = np.random.default_rng(1).standard_normal((items, shape.dim)).astype(np.float32)
    add(root / "index", vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    return root / "index"


def p50_ms(call: Callable[[str], object], queries: list[str]) -> float:
    call(queries[-1])  # warm-up
    times = []
    for query in queries:
        started = time.perf_counter()
        call(query)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def raw_p50s(index: Path, queries: list[str]) -> tuple[float, float]:
    """(encode p50, encode + store search p50) in this process, with the server's thread counts (onnxruntime
    ``THREADS``, faiss one: ``search_threads``)."""
    faiss.omp_set_num_threads(1)
    encoder = text_encoder_of(index / "model", ModelManifest.load(index / "model"), threads=THREADS)
    encode = p50_ms(lambda text: encoder.encode([text]), queries)
    with open_store(index) as store:
        both = p50_ms(lambda text: store.search(encoder.encode([text]), K), queries)
    return encode, both


def http_p50s(index: Path, queries: list[str]) -> tuple[float, float]:
    """(JSON p50, form p50) of one-text POST /search on a running service."""
    port = free_port()
    server = start_server(index, port, Variant("text"))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:

            def by_json(text: str) -> None:
                http.post("/search", json={"text": text, "k": K}).raise_for_status()

            def by_form(text: str) -> None:
                http.post("/search", data={"text": text, "k": str(K)}).raise_for_status()

            return p50_ms(by_json, queries), p50_ms(by_form, queries)
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    args = parse_args()
    shape = QUICK_SHAPE if args.small_tower else TowerShape()
    with tempfile.TemporaryDirectory() as tmp:
        index = build(Path(tmp), shape, args.items)
        queries = texts(args.queries, seed=2)
        encode, raw = raw_p50s(index, queries)
        as_json, as_form = http_p50s(index, queries)
    tower = "2-layer quick" if args.small_tower else "open_clip ViT-B-32 (12 x 512, 77 tokens, random weights)"
    print(f"\ntext search, {args.items:,} items + 10 images, k={K}, tower {tower}, fp32, {THREADS} threads\n")
    print("| path | p50 ms | x raw |")
    print("|---|---:|---:|")
    print(f"| text tower encode (tokenizer + text.onnx) | {encode:.1f} | - |")
    print(f"| raw: encode + store search | {raw:.1f} | 1.00 |")
    for name, value in (("HTTP POST /search JSON text", as_json), ("HTTP POST /search form text", as_form)):
        verdict = "meets" if value <= 1.5 * raw else "misses"
        print(f"| {name} | {value:.1f} | {value / raw:.2f} ({verdict} <= 1.5) |")


if __name__ == "__main__":
    main()
