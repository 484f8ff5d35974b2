"""The index as a vector database over HTTP: insert and search by vector, against the store itself and milvus-lite.

Insert: the same random unit vectors (100,000 x 512-d by default) in batches of 1,000, as JSON ``POST /items``
to a running service (uvicorn in a subprocess, as ``retrieval serve`` runs it), through ``IndexStore.add``
directly (what the route calls), and by milvus-lite's ``insert`` of the same rows (``bench_milvus``'s
harness). Search: the p50 of one-vector JSON ``POST /search`` (k=10, float and binary) at the full size,
against the store's own ``search`` of the same queries plus the p50 of a raw HTTP round trip (``GET
/healthz``) on the same server, the three taken in turn. Targets (issue 46): HTTP insert >= 50 % of the
store's rate and >= milvus-lite's; HTTP search p50 <= 1.5 x (store p50 + round trip p50).

    python bench/bench_vectors.py                       # 100,000 items (a few minutes)
    python bench/bench_vectors.py --items 20000          # quicker
    python bench/bench_vectors.py --quick                # a smoke run (3,000 items)

The four inserts run side by side, a batch to each in turn, so that each meets the same machine load: the
store directly, milvus-lite, and HTTP twice (each on its own server and copy of the index): the vectors as
JSON numbers (``vector``) and as base64 float32 (``vector_b64``, a quarter of the bytes, no number parsing).
Only the calls are timed, not the preparation of a batch (the records, milvus's rows, the JSON body).
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import faiss
import httpx
import numpy as np
from bench_models import export_resnet18
from serving_server import Variant, free_port, start_server

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.milvus.milvus_client import connect, create_collections
from retrieval.indexing.store.milvus.milvus_rows import item_rows
from retrieval.indexing.usecases.vector_input import vector_records

DIM = 512
KEY = "bench-key-0123456789"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="vectors inserted")
    parser.add_argument("--batch", type=int, default=1000, help="vectors per insert call")
    parser.add_argument("--queries", type=int, default=200, help="one-vector searches timed per kind")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3,000 items, 20 queries")
    args = parser.parse_args()
    if args.quick:
        args.items, args.queries = min(args.items, 3000), min(args.queries, 20)
    return args


def unit_vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def small_index(root: Path) -> Path:
    """An index of 20 generated images embedded by a random resnet18 (512-d): a model the service can load."""
    export_resnet18(root / "export")
    generate_synthetic_dataset(root / "data", classes=2, per_class=10, size=64, progress=False)
    build_index(root / "export", load_records(root / "data"), root / "index", progress=False)
    return root / "index"


Prepare = Callable[[np.ndarray, int], Any]
"""A batch as its client holds it before the call (a JSON body, the records, milvus's rows): not timed."""


def batch_records(chunk: np.ndarray, start: int) -> list[ImageRecord]:
    keys = [f"k{start + i}" for i in range(len(chunk))]
    return vector_records(len(chunk), labels=[f"c{(start + i) % 100}" for i in range(len(chunk))], keys=keys)


def json_body(chunk: np.ndarray, start: int) -> bytes:
    """The JSON body of a batch, as ``json.dumps`` of the float32 values writes it (about 11 MB per 1,000)."""
    records = batch_records(chunk, start)
    items = [{"vector": row, "key": r.key, "label": r.label} for row, r in zip(chunk.tolist(), records, strict=True)]
    return json.dumps({"items": items}).encode()


def b64_body(chunk: np.ndarray, start: int) -> bytes:
    """The same batch with each vector as ``vector_b64`` (base64 of its little-endian float32 bytes)."""
    records = batch_records(chunk, start)
    rows = [base64.b64encode(row.astype("<f4").tobytes()).decode() for row in chunk]
    items = [{"vector_b64": row, "key": r.key, "label": r.label} for row, r in zip(rows, records, strict=True)]
    return json.dumps({"items": items}).encode()


def http_insert(http: httpx.Client) -> Callable[[bytes], None]:
    def insert(body: bytes) -> None:
        answer = http.post("/items", content=body, headers={"Content-Type": "application/json"})
        if answer.status_code != 201:
            raise SystemExit(f"insert failed: {answer.status_code} {answer.text[:300]}")

    return insert


def milvus_rows(chunk: np.ndarray, start: int) -> list[dict[str, Any]]:
    return item_rows(batch_records(chunk, start), chunk, range(start + 1, start + 1 + len(chunk)), 0.0)


def milvus_insert(root: Path) -> Callable[[list[dict[str, Any]]], object]:
    client = connect(str(root / "milvus.db"))
    create_collections(client, "bench", dim=DIM, bits=DIM)
    return lambda rows: client.insert("bench", data=rows)


def encode_seconds(vectors: np.ndarray, batch: int) -> float:
    """What the client spends writing the JSON bodies (``json.dumps``), per 1,000 vectors."""
    started = time.perf_counter()
    for start in range(0, min(len(vectors), 5 * batch), batch):
        json_body(vectors[start : start + batch], start)
    return (time.perf_counter() - started) / min(len(vectors), 5 * batch) * 1000


def p50s_ms(calls: list[Callable[[], object]], repeats: int) -> list[float]:
    """The median milliseconds of each call, the calls taken in turn (each meets the same machine load)."""
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for spent, call in zip(times, calls, strict=True):
            started = time.perf_counter()
            call()
            spent.append((time.perf_counter() - started) * 1000)
    return [statistics.median(spent) for spent in times]


def _posts(http: httpx.Client, bodies: list[str]) -> Callable[[], object]:
    cycle = iter(bodies * 2)
    return lambda: http.post("/search", content=next(cycle), headers={"Content-Type": "application/json"})


def _searches(store: IndexStore, queries: np.ndarray, kind: str) -> Callable[[], object]:
    cycle = iter(np.concatenate([queries, queries]))
    return lambda: store.search(next(cycle)[None], 10, kind=kind)  # type: ignore[arg-type]


def search_rows(http: httpx.Client, index_dir: Path, queries: np.ndarray) -> list[tuple[str, ...]]:
    """Per kind, the p50 of a one-vector JSON search, of the store's own search and of ``GET /healthz`` (the
    raw HTTP round trip), taken in turn."""
    rows = []
    bodies = [json.dumps({"vector": query.tolist(), "k": 10}) for query in queries]
    with IndexStore.open(index_dir) as store:
        for kind in ("float", "binary"):
            typed = [body[:-1] + f', "index": "{kind}"}}' for body in bodies]
            calls = [_posts(http, typed), _searches(store, queries, kind), lambda: http.get("/healthz")]
            over_http, own, round_trip = p50s_ms(calls, len(queries))
            verdict = "met" if over_http <= 1.5 * (own + round_trip) else "missed"
            rows.append(
                (
                    f"search p50, {kind}",
                    f"{over_http:.2f} ms",
                    f"store {own:.2f} + HTTP round trip {round_trip:.2f} ms",
                    f"{over_http / (own + round_trip):.2f}x (target <= 1.5x: {verdict})",
                )
            )
    return rows


@contextmanager
def served(served_dir: Path, template: Path) -> Iterator[httpx.Client]:
    """A client of a server of its own on a copy of ``template``."""
    shutil.copytree(template, served_dir)
    port = free_port()
    server = start_server(served_dir, port, Variant("vectors", env={"RETRIEVAL_API_KEY": KEY}))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": KEY}, timeout=120) as http:
            yield http
    finally:
        server.terminate()
        server.wait(timeout=30)


def alternating(vectors: np.ndarray, batch: int, ways: list[tuple[Prepare, Callable[[Any], object]]]) -> list[float]:
    """Vectors per second of each way (``prepare`` a batch, then ``insert`` it: only the call is timed), a batch
    to each in turn, so that every way meets the same machine load."""
    spent = [0.0] * len(ways)
    for start in range(0, len(vectors), batch):
        for way, (prepare, insert) in enumerate(ways):
            payload = prepare(vectors[start : start + batch], start)
            called = time.perf_counter()
            insert(payload)
            spent[way] += time.perf_counter() - called
    return [len(vectors) / seconds for seconds in spent]


def main() -> None:
    args = parse_args()
    faiss.omp_set_num_threads(1)  # one query at a time, as the service's store thread searches (search_threads)
    vectors, queries = unit_vectors(args.items, 0), unit_vectors(args.queries, 1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        template = small_index(root / "template")
        direct_dir = Path(shutil.copytree(template, root / "direct"))
        encode_s = encode_seconds(vectors, args.batch)
        with (
            IndexStore.open(direct_dir) as store,
            served(root / "served", template) as http,
            served(root / "served-b64", template) as http_b64,
        ):
            ways = [
                (lambda c, s: (batch_records(c, s), c), lambda p: store.add(*p)),
                (milvus_rows, milvus_insert(root / "milvus")),
                (json_body, http_insert(http)),
                (b64_body, http_insert(http_b64)),
            ]
            direct, milvus, over_http, over_b64 = alternating(vectors, args.batch, ways)
            rows = search_rows(http, root / "served", queries)
    header = ("what", "HTTP (JSON)", "baseline", "ratio")
    table = [
        header,
        (
            "insert vectors/s",
            f"{over_http:,.0f}",
            f"store.add {direct:,.0f}",
            f"{over_http / direct:.2f}x (target >= 0.5x: {'met' if over_http >= 0.5 * direct else 'missed'})",
        ),
        (
            "insert vectors/s",
            f"{over_http:,.0f}",
            f"milvus-lite insert {milvus:,.0f}",
            f"{over_http / milvus:.2f}x (target >= 1x: {'met' if over_http >= milvus else 'missed'})",
        ),
        (
            "insert vectors/s",
            f"{over_b64:,.0f} (vector_b64)",
            f"milvus-lite insert {milvus:,.0f}",
            f"{over_b64 / milvus:.2f}x (target >= 1x: {'met' if over_b64 >= milvus else 'missed'})",
        ),
        *rows,
    ]
    print(f"{args.items:,} x {DIM}-d vectors, batches of {args.batch:,}; {args.queries} queries per search kind")
    print(f"(the client's json.dumps of a batch, not in the HTTP rate: {encode_s:.2f} s per 1,000 vectors)")
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for number, row in enumerate(table):
        print("| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |")
        if number == 0:
            print("|" + "|".join("-" * (width + 2) for width in widths) + "|")


if __name__ == "__main__":
    main()
