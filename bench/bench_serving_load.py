"""Load test of the search service against the raw batched ONNX throughput of the same model.

Exports a random-weights resnet18 (512-d, 224 px) to ONNX like ``retrieval export``, builds
an index over a generated gallery, starts ``uvicorn`` in a subprocess on 127.0.0.1 and fires
``--clients`` concurrent clients at ``POST /search`` until ``--requests`` are done or
``--seconds`` pass, once per variant (client kind, server settings, source tree). Before the
first variant and after each one it measures what onnxruntime alone does on preprocessed
batches of the service's batch size with the same threads: the ceiling a variant is compared
with is the mean of the measurements just before and just after it (the machine is shared).

    python bench/bench_serving_load.py [--clients 16] [--requests 300] [--repeats 1]
        [--compare] [--tree NAME=DIR ...]
    python bench/bench_serving_load.py --overload 4 [--overload-seconds 30]   # backpressure (overload_protocol.py)

Variants: this source tree with the raw client (pre-encoded requests) and with the httpx client
(``load_clients.py``; both run in this process, the server in its own). ``--compare`` adds this
tree with faiss on 2 OpenMP threads in the store thread and with onnxruntime's threads spinning
(what the service did before ``search_threads`` and ``onnx_spin_wait``). ``--plain-uvicorn`` adds this tree on
asyncio's event loop and h11 (``UVICORN_LOOP``/``UVICORN_HTTP``), what uvicorn runs without uvloop and httptools.
``--tree NAME=DIR`` adds servers run from another source tree (PYTHONPATH=DIR), e.g. the last
commit for a before/after in the same run: ``mkdir -p /tmp/head/retrieval && git archive HEAD
serving indexing | tar -x -C /tmp/head/retrieval`` then ``--tree before=/tmp/head``.

Besides throughput and latency it reports the CPU time per request of the server (all threads,
and its event loop thread alone) and of the clients, and "ONNX share of CPU": onnxruntime's CPU
per image in the raw runs over the server's and client's CPU per request, the throughput ratio
to expect where the two cores are the only limit (it depends less on other jobs than the
throughput ratio). The server gets the thread settings ``retrieval serve`` sets (OMP_WAIT_POLICY=PASSIVE,
OPENBLAS_THREAD_TIMEOUT=20, cli/thread_env.py)
(``--omp-wait-policy unset`` as the first version of this benchmark ran it: faiss's OpenMP threads
then spin after every search). OPENBLAS_CORETYPE is not set (faiss is a negligible share here).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from load_clients import LOADS, LoadResult, process_cpu_s
from overload_protocol import run_overload, table
from PIL import Image
from quick_mode import parse_quick
from serving_server import BATCH, THREADS, Variant, build_fixture, free_port, start_server

from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.preprocess import preprocess_batch


@dataclass(frozen=True)
class RawRate:
    images_per_s: float
    cpu_ms_per_image: float  # process CPU (all onnxruntime threads) per image


def raw_onnx_rate(model_dir: Path, jpegs: list[bytes], seconds: float) -> RawRate:
    """What onnxruntime alone does on preprocessed batches of BATCH (no decode, no HTTP): the better
    of its two spin settings (spinning threads help alone on the cores, not beside other jobs)."""
    images = [Image.open(io.BytesIO(data)).convert("RGB") for data in jpegs[:BATCH]]
    rates = []
    for spin_wait in (True, False):
        embedder = OnnxEmbedder(model_dir, threads=THREADS, providers="cpu", spin_wait=spin_wait)
        batch = preprocess_batch(images, embedder.manifest.preprocessing)
        embedder.embed_arrays(batch)  # warm-up
        done, started, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - started < seconds / 2:
            embedder.embed_arrays(batch)
            done += len(batch)
        rates.append(RawRate(done / (time.perf_counter() - started), (time.process_time() - cpu) * 1000.0 / done))
    return max(rates, key=lambda rate: rate.images_per_s)


def mean_rate(*rates: RawRate) -> RawRate:
    return RawRate(
        *(sum(values) / len(rates) for values in zip(*((r.images_per_s, r.cpu_ms_per_image) for r in rates)))
    )


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


@dataclass
class Served:
    load: LoadResult
    mean_batch: float
    server_cpu_ms: float  # per request, all threads
    loop_cpu_ms: float  # per request, the event loop (main) thread


def serve_and_load(index_dir: Path, jpegs: list[bytes], variant: Variant, args: argparse.Namespace) -> Served:
    port = free_port()
    server = start_server(index_dir, port, variant, args.omp_wait_policy)
    load = LOADS[variant.client]
    try:
        asyncio.run(load(port, jpegs, 3, 32, args.seconds))  # warm-up, not counted
        cpu, loop_cpu = process_cpu_s(server.pid), process_cpu_s(server.pid, server.pid)
        result = asyncio.run(load(port, jpegs, args.clients, args.requests, args.seconds))
        cpu_after, loop_after = process_cpu_s(server.pid), process_cpu_s(server.pid, server.pid)
        before_batches = batch_sizes(f"http://127.0.0.1:{port}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    per_request = 1000.0 / max(1, len(result.latencies_s))
    return Served(
        load=result,
        mean_batch=before_batches[0],
        server_cpu_ms=((cpu_after or 0.0) - (cpu or 0.0)) * per_request,
        loop_cpu_ms=((loop_after or 0.0) - (loop_cpu or 0.0)) * per_request,
    )


def variants(args: argparse.Namespace) -> list[Variant]:
    chosen = [Variant("this tree, raw client"), Variant("this tree, httpx client", client="httpx")]
    if args.compare:
        chosen.append(Variant("this tree, faiss on 2 threads, raw client", env={"RETRIEVAL_SEARCH_THREADS": "2"}))
        chosen.append(Variant("this tree, onnxruntime spinning, raw client", env={"RETRIEVAL_ONNX_SPIN_WAIT": "true"}))
    if args.plain_uvicorn:
        plain = {"UVICORN_LOOP": "asyncio", "UVICORN_HTTP": "h11"}
        chosen.append(Variant("this tree, asyncio + h11, raw client", env=plain))
        chosen.append(Variant("this tree, asyncio + h11, httpx client", client="httpx", env=plain))
    for tree in args.tree:
        name, _, source = tree.partition("=")
        chosen.append(Variant(f"{name}, raw client", source=Path(source)))
        chosen.append(Variant(f"{name}, httpx client", client="httpx", source=Path(source)))
    return chosen


def row(round_: int, variant: Variant, served: Served, raw: RawRate) -> str:
    """One table row; ``raw`` is the ceiling measured around this variant."""
    load = served.load
    client_ms = 1000.0 * load.client_cpu_s / max(1, len(load.latencies_s))
    cpu_share = raw.cpu_ms_per_image / (served.server_cpu_ms + client_ms) if served.server_cpu_ms else 0.0
    return (
        f"| {round_} | {variant.name} | {load.rate:.1f} | **{load.rate / raw.images_per_s:.0%}** | {cpu_share:.0%} | "
        f"{load.percentile_ms(50):.0f} / {load.percentile_ms(99):.0f} | {load.errors} | {served.mean_batch:.1f} | "
        f"{served.server_cpu_ms:.1f} ({served.loop_cpu_ms:.1f}) | {client_ms:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--gallery", type=int, default=200, help="gallery images (10 per class)")
    parser.add_argument("--image-size", type=int, default=224, help="the model's input size in px")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over all variants")
    parser.add_argument(
        "--raw-seconds", type=float, default=8.0, help="length of each raw ONNX measurement (both spin settings)"
    )
    parser.add_argument(
        "--compare", action="store_true", help="add servers with faiss on 2 threads / onnxruntime spinning"
    )
    parser.add_argument(
        "--plain-uvicorn",
        action="store_true",
        help="add servers on asyncio's event loop and h11 (uvicorn without uvloop and httptools)",
    )
    parser.add_argument(
        "--tree", action="append", default=[], metavar="NAME=DIR", help="add servers run from this source tree"
    )
    parser.add_argument(
        "--omp-wait-policy",
        default="PASSIVE",
        choices=["PASSIVE", "ACTIVE", "unset"],
        help="OMP_WAIT_POLICY of the server: PASSIVE as `retrieval serve` sets it; unset as the first version of this benchmark",
    )
    parser.add_argument(
        "--overload",
        type=float,
        default=None,
        metavar="F",
        help="instead of the variants: saturation, then open-loop arrivals at F x its rate (overload_protocol.py)",
    )
    parser.add_argument("--overload-seconds", type=float, default=30.0, help="length of the open-loop run")
    parser.add_argument("--timeout", type=float, default=30.0, help="the server's request_timeout_s (--overload)")
    args = parse_quick(
        parser,
        clients=2,
        requests=8,
        gallery=20,
        image_size=64,
        raw_seconds=0.4,
        seconds=60.0,
        overload_seconds=1.0,
        timeout=5.0,
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model_dir, index_dir, jpegs = build_fixture(tmp, args.gallery, args.image_size)
        if args.overload is not None:
            runs = run_overload(index_dir, jpegs, args)
            print(
                f"resnet18 ONNX {args.image_size} px, gallery {args.gallery}, {THREADS} onnxruntime threads; saturation: {args.clients} "
                f"closed-loop clients, {args.requests} requests; overload: {args.overload:g}x that rate open-loop for "
                f"{args.overload_seconds:g} s, one connection per request; request_timeout_s {args.timeout:g}; "
                f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
            )
            print("\n".join(table(runs, args.overload)))
            return
        rows, raws = [], []
        for round_ in range(1, args.repeats + 1):
            before = raw_onnx_rate(model_dir, jpegs, args.raw_seconds)
            raws.append(before)
            for variant in variants(args):
                served = serve_and_load(index_dir, jpegs, variant, args)
                after = raw_onnx_rate(model_dir, jpegs, args.raw_seconds)
                raws.append(after)
                # the machine is shared: the ceiling is the mean of the raw runs just before and after
                rows.append(row(round_, variant, served, mean_rate(before, after)))
                before = after
    print(
        f"resnet18 ONNX {args.image_size} px, 512-d, gallery {args.gallery}, {THREADS} onnxruntime threads, {args.clients} clients, "
        f"{args.requests} requests per variant, server OMP_WAIT_POLICY={args.omp_wait_policy}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
        f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"raw batched ONNX (batch {BATCH}, preprocessed, no HTTP) between the variants, img/s: "
        + ", ".join(f"{raw.images_per_s:.1f}" for raw in raws)
        + f"; onnxruntime CPU per image: {sum(raw.cpu_ms_per_image for raw in raws) / len(raws):.1f} ms"
    )
    print(
        "| round | variant | served req/s | served / raw ONNX | ONNX share of CPU | p50 / p99 ms | errors "
        "| mean batch | server CPU ms/req (event loop) | client CPU ms/req |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
