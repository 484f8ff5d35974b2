"""Load test of the search service against the raw batched ONNX throughput of the same model.

Exports a random-weights resnet18 (512-d, 224 px) to ONNX like ``retrieval export``, builds
an index over a generated gallery, starts ``uvicorn`` in a subprocess on 127.0.0.1 and
fires ``--clients`` concurrent clients (httpx + asyncio) at ``POST /search`` until
``--requests`` are done or ``--seconds`` pass. In the same run, with the server stopped,
it measures what onnxruntime alone does on batches of the service's batch size, on the
same threads: the ceiling the service is compared with.

    python bench/bench_serving_load.py [--clients 16] [--requests 300] [--seconds 120]

OPENBLAS_CORETYPE is not set: the gallery is small, so faiss is a negligible share here.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from bench_models import export_resnet18
from PIL import Image

from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.model.preprocess import preprocess_batch
from retrieval.indexing.store.builder import build_index

THREADS = 2
BATCH = 16


def query_jpegs(records, count: int) -> list[bytes]:
    """JPEG bytes of gallery images at a photo-like 500x375, as a client would upload."""
    payloads = []
    for record in records[:count]:
        buffer = io.BytesIO()
        Image.open(record.path).convert("RGB").resize((500, 375)).save(buffer, "JPEG", quality=90)
        payloads.append(buffer.getvalue())
    return payloads


def raw_onnx_rate(model_dir: Path, jpegs: list[bytes], seconds: float = 8.0) -> float:
    """Images/s of onnxruntime alone on preprocessed batches of BATCH (no decode, no HTTP)."""
    embedder = OnnxEmbedder(model_dir, threads=THREADS, providers="cpu")
    images = [Image.open(io.BytesIO(data)).convert("RGB") for data in jpegs[:BATCH]]
    batch = preprocess_batch(images, embedder.manifest.preprocessing)
    embedder.embed_arrays(batch)  # warm-up
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        embedder.embed_arrays(batch)
        done += len(batch)
    return done / (time.perf_counter() - started)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(index_dir: Path, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "RETRIEVAL_INDEX_DIR": str(index_dir),
        "RETRIEVAL_THREADS": str(THREADS),
        "RETRIEVAL_BATCH_MAX_SIZE": str(BATCH),
        "RETRIEVAL_BATCH_MAX_WAIT_MS": "4",
    }
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "retrieval.serving.app:app_from_env",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    server = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    server.terminate()
    raise SystemExit("the server did not become ready within 60 s")


async def load(base: str, jpegs: list[bytes], clients: int, requests: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors = 0
    issued = 0
    deadline = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors, issued
        while issued < requests and time.monotonic() < deadline:
            data = jpegs[issued % len(jpegs)]
            issued += 1
            started = time.perf_counter()
            try:
                response = await http.post("/search", params={"k": 10}, files={"image": ("q.jpg", data, "image/jpeg")})
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            latencies.append(time.perf_counter() - started)
            errors += not ok

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(3)))  # warm-up, not counted
        latencies.clear()
        errors, issued = 0, 0
        started = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        elapsed = time.perf_counter() - started
    lat_ms = np.asarray(latencies) * 1000.0
    return {
        "requests": len(latencies),
        "errors": errors,
        "seconds": elapsed,
        "rate": len(latencies) / elapsed,
        "p50": float(np.percentile(lat_ms, 50)),
        "p95": float(np.percentile(lat_ms, 95)),
        "p99": float(np.percentile(lat_ms, 99)),
    }


def batch_sizes(base: str) -> tuple[float, float]:
    """(mean batch size, number of onnxruntime calls) from the service's own metrics."""
    text = httpx.get(f"{base}/metrics").text
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("retrieval_embed_batch_size_")
    }
    count, total = (
        values.get("retrieval_embed_batch_size_count", 0.0),
        values.get("retrieval_embed_batch_size_sum", 0.0),
    )
    return (total / count if count else 0.0), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--gallery", type=int, default=200, help="gallery images (10 per class)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model_dir = tmp / "export"
        export_resnet18(model_dir)
        generate_synthetic_dataset(
            tmp / "data", classes=max(1, args.gallery // 10), per_class=10, size=128, progress=False
        )
        records = load_records(tmp / "data")
        build_index(model_dir, records, tmp / "index", threads=THREADS, progress=False)
        jpegs = query_jpegs(records, 64)
        raw_before = raw_onnx_rate(model_dir, jpegs)
        port = free_port()
        server = start_server(tmp / "index", port)
        try:
            result = asyncio.run(load(f"http://127.0.0.1:{port}", jpegs, args.clients, args.requests, args.seconds))
            mean_batch, calls = batch_sizes(f"http://127.0.0.1:{port}")
        finally:
            server.terminate()
            server.wait(timeout=30)
        raw_after = raw_onnx_rate(model_dir, jpegs)
    raw = (raw_before + raw_after) / 2  # the machine is shared: average the runs before and after the load
    print(
        f"resnet18 ONNX 224 px, 512-d, gallery {len(records)}, {THREADS} onnxruntime threads, "
        f"{args.clients} clients, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
        f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print("| measure | value |\n|---|---|")
    print(
        f"| raw batched ONNX (batch {BATCH}, preprocessed, no HTTP) | {raw:.1f} img/s (runs: {raw_before:.1f}, {raw_after:.1f}) |"
    )
    print(
        f"| service POST /search throughput | {result['rate']:.1f} req/s ({result['requests']} requests in {result['seconds']:.1f} s) |"
    )
    print(f"| service / raw ONNX | {result['rate'] / raw:.0%} (goal >= 70%) |")
    print(f"| latency p50 / p95 / p99 | {result['p50']:.0f} / {result['p95']:.0f} / {result['p99']:.0f} ms |")
    print(f"| errors | {result['errors']} |")
    print(f"| mean micro-batch size | {mean_batch:.1f} over {calls:.0f} onnxruntime calls |")


if __name__ == "__main__":
    main()
