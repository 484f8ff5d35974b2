"""Where one ``POST /search`` spends its time: CPU per stage in-process, then the service's own timings.

Part 1 runs every stage of a request alone, in this process, on the load benchmark's fixture
(random-weights resnet18 ONNX, 200-image gallery, 500 x 375 JPEG queries) and reports the CPU
time per request (the median of ``--repeats`` runs of each stage; process CPU for the stages
that use several threads, so spin-waiting threads are counted). Part 2 starts the service as
``bench_serving_load.py`` does and reads the ``timings`` of its answers, with one client (no
queueing) and with ``--clients`` (queueing for the micro-batch and the CPU), next to the
latency the client saw: what lies outside ``total_ms`` is HTTP, multipart parsing, routing and
JSON, and the wait for the event loop.

    python bench/profile_search_request.py [--repeats 50] [--clients 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import faiss
import numpy as np
from bench_serving_load import BATCH, THREADS, Variant, build_fixture, free_port, start_server
from load_clients import BOUNDARY, raw_load, search_request
from starlette.datastructures import Headers
from starlette.formparsers import MultiPartParser

from retrieval.indexing.data.image_io import open_rgb_bytes
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.preprocess import normalize_pixels, resize_and_crop
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.item_search import ranked_pages
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.serving.http.schemas import SearchHit, SearchResponse, Timings
from retrieval.serving.item_views import thumbnail_url


def cpu_ms(work: Callable[[], object], repeats: int, per: int = 1) -> float:
    """Median process CPU of ``work()`` in ms, divided by ``per`` (images in one call)."""
    work()
    samples = []
    for _ in range(repeats):
        started = time.process_time()
        work()
        samples.append((time.process_time() - started) * 1000.0 / per)
    return float(np.median(samples))


def multipart_parse(jpeg: bytes) -> Callable[[], object]:
    request = search_request(jpeg, 80)
    head, body = request.split(b"\r\n\r\n", 1)
    headers = Headers({"content-type": f"multipart/form-data; boundary={BOUNDARY}"})

    async def stream():
        yield body

    async def parse() -> bytes:
        form = await MultiPartParser(headers, stream()).parse()
        return await form["image"].read()  # type: ignore[union-attr]

    loop = asyncio.new_event_loop()  # one loop for all runs: asyncio.run() would time creating loops
    return lambda: loop.run_until_complete(parse())


def arithmetic_normalize(pixels: np.ndarray, prep) -> np.ndarray:
    """The normalisation as it was computed before the look-up table (same values)."""
    scaled = pixels.astype(np.float32) / np.float32(255.0)
    mean, std = np.asarray(prep.mean, dtype=np.float32), np.asarray(prep.std, dtype=np.float32)
    return np.ascontiguousarray(((scaled - mean) / std).transpose(2, 0, 1))


def response_json(store: IndexStore, vector: np.ndarray) -> bytes:
    (page,) = ranked_pages(store, vector.reshape(1, -1), SearchSettings(k=10))
    found = page.hits
    hits = [
        SearchHit(id=i.id, score=s, label=i.label, metadata=dict(i.metadata), thumbnail_url=thumbnail_url(i.id))
        for i, s in found
    ]
    response = SearchResponse(index="float", k=10, score_kind="cosine", results=hits, timings=Timings())
    return SearchResponse.model_validate(response).model_dump_json().encode()


def stage_table(model_dir: Path, index_dir: Path, jpeg: bytes, repeats: int) -> list[tuple[str, float]]:
    embedder = OnnxEmbedder(model_dir, threads=THREADS, providers="cpu")
    prep = embedder.manifest.preprocessing
    image = open_rgb_bytes(jpeg, max_pixels=40_000_000, name="q")
    pixels = np.asarray(resize_and_crop(image, prep))
    one = normalize_pixels(pixels, prep)
    vector = embedder.embed_arrays(one[None])[0]
    rows = [
        ("multipart parsing (starlette + python-multipart)", cpu_ms(multipart_parse(jpeg), repeats)),
        ("JPEG decode (open_rgb_bytes, 500 x 375)", cpu_ms(lambda: open_rgb_bytes(jpeg, 40_000_000, "q"), repeats)),
        ("resize + centre crop (Pillow bilinear)", cpu_ms(lambda: resize_and_crop(image, prep), repeats)),
        ("normalise: float32 arithmetic (before)", cpu_ms(lambda: arithmetic_normalize(pixels, prep), repeats)),
        ("normalise: look-up table (now)", cpu_ms(lambda: normalize_pixels(pixels, prep), repeats)),
        ("batch assembly (np.stack of 16, per image)", cpu_ms(lambda: np.stack([one] * BATCH), repeats, BATCH)),
    ]
    for threads in (2, 1):  # the store thread, as the service runs it
        with ThreadPoolExecutor(1, initializer=faiss.omp_set_num_threads, initargs=(threads,)) as store_thread:
            store = store_thread.submit(IndexStore.open, index_dir).result()

            def search(store=store) -> object:
                return ranked_pages(store, vector.reshape(1, -1), SearchSettings(k=10))

            label = f"store search k=10 + item rows, faiss on {threads} thread{'s' * (threads > 1)}"
            rows.append((label, store_thread.submit(cpu_ms, search, repeats).result()))
            response = store_thread.submit(cpu_ms, lambda store=store: response_json(store, vector), repeats)
            if threads == 1:
                rows.append(("response model + JSON (with the search)", response.result() - rows[-1][1]))
    batch = np.stack([one] * BATCH)
    rows.append(("ONNX, batch of 1 (per image)", cpu_ms(lambda: embedder.embed_arrays(one[None]), repeats // 2 + 1)))
    rows.append((f"ONNX, batch of {BATCH} (per image)", cpu_ms(lambda: embedder.embed_arrays(batch), 5, BATCH)))
    return rows


def service_timings(index_dir: Path, jpegs: list[bytes], clients: int, requests: int) -> dict[str, float]:
    port = free_port()
    server = start_server(index_dir, port, Variant("profile"))
    try:
        asyncio.run(raw_load(port, jpegs, 2, 16, 60))  # warm-up
        result = asyncio.run(raw_load(port, jpegs, clients, requests, 120, keep_bodies=True))
    finally:
        server.terminate()
        server.wait(timeout=30)
    timings = [json.loads(body)["timings"] for body in result.bodies]
    medians = {key: float(np.median([t[key] for t in timings])) for key in timings[0]}
    medians["client latency"] = result.percentile_ms(50)
    outside = [lat * 1000.0 - t["total_ms"] for lat, t in zip(result.latencies_s, timings)]
    medians["outside total_ms"] = float(np.median(outside))
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        model_dir, index_dir, jpegs = build_fixture(Path(tmp_name), 200)
        rows = stage_table(model_dir, index_dir, jpegs[0], args.repeats)
        alone = service_timings(index_dir, jpegs, 1, 60)
        loaded = service_timings(index_dir, jpegs, args.clients, args.requests)
    print(f"1. CPU per request by stage (ms, median of {args.repeats}; JPEG of {len(jpegs[0])} bytes)")
    print("| stage | CPU ms |\n|---|---|")
    print("\n".join(f"| {name} | {value:.2f} |" for name, value in rows))
    print("\n2. the service's timings (medians, ms)")
    print(f"| timing | 1 client | {args.clients} clients |\n|---|---|---|")
    print("\n".join(f"| {key} | {alone[key]:.1f} | {loaded[key]:.1f} |" for key in alone))


if __name__ == "__main__":
    main()
