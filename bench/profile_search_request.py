"""Where one ``POST /search`` spends its time: CPU per stage in-process, then the service's own timings.

Part 1 runs every stage of a request alone, in this process, on the load benchmark's fixture
(random-weights resnet18 ONNX, 200-image gallery, a JPEG query of ``--query-size``, 500 x 375 by
default, a phone photo with 4032x3024) and reports the CPU time per request (the median of
``--repeats`` runs of each stage; process CPU for the stages that use several threads, so
spin-waiting threads are counted). The stages are the service's own code, built as the service
builds them (``create_app``'s services, ``open_snapshot``'s model and store on its store thread,
``query_pipeline``'s decode and ``search_store``, the route's response and FastAPI's serialisation of
it), so this profile cannot drift from what it profiles. Part 2 starts the service as
``bench_serving_load.py`` does and reads the ``timings`` of its answers, with one client (no
queueing) and with ``--clients`` (queueing for the micro-batch and the CPU), next to the latency the
client saw: what lies outside ``total_ms`` is HTTP, multipart parsing, routing and JSON, and the
wait for the event loop.

    python bench/profile_search_request.py [--repeats 50] [--clients 16] [--query-size 4032x3024]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
from fastapi.routing import APIRoute, serialize_response
from load_clients import BOUNDARY, raw_load, search_request
from PIL import Image
from quick_mode import parse_quick
from serving_server import BATCH, THREADS, Variant, build_fixture, free_port, start_server
from starlette.datastructures import Headers
from starlette.formparsers import MultiPartParser

from retrieval.indexing.data.image_io import open_rgb_bytes
from retrieval.indexing.exported_model.model_manifest import Preprocessing
from retrieval.indexing.exported_model.preprocess import normalize_pixels, resize_and_crop
from retrieval.indexing.query.query import Query
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.usecases.searching import search_store
from retrieval.serving.api_models.schemas import Timings
from retrieval.serving.app import create_app
from retrieval.serving.query_pipeline import FoundPage, decode_query, shown
from retrieval.serving.routes import routes_search
from retrieval.serving.routes.routes_search import _response
from retrieval.serving.routes.search_fields import SearchOptions, settings_of
from retrieval.serving.service_state import open_snapshot
from retrieval.serving.settings import ServeSettings


def cpu_ms(work: Callable[[], object], repeats: int, per: int = 1) -> float:
    """Median process CPU of ``work()`` in ms, divided by ``per`` (images in one call)."""
    work()
    samples = []
    for _ in range(repeats):
        started = time.process_time()
        work()
        samples.append((time.process_time() - started) * 1000.0 / per)
    return float(np.median(samples))


def multipart_parse(jpeg: bytes, loop: asyncio.AbstractEventLoop) -> Callable[[], object]:
    request = search_request(jpeg, 80)
    head, body = request.split(b"\r\n\r\n", 1)
    headers = Headers({"content-type": f"multipart/form-data; boundary={BOUNDARY}"})

    async def stream():
        yield body

    async def parse() -> bytes:
        form = await MultiPartParser(headers, stream()).parse()
        return await form["image"].read()  # type: ignore[union-attr]

    return lambda: loop.run_until_complete(parse())


def response_body(
    route: APIRoute, settings: SearchSettings, page: FoundPage, loop, encoder: str = "pydantic"
) -> Callable[[], bytes]:
    """The route's response to one query's hits, FastAPI's validation of it and its JSON: ``pydantic`` as FastAPI
    (0.130+) writes it for a route with a response model (pydantic-core's ``serialize_json``, no dict in
    between), ``orjson`` as an ``ORJSONResponse`` would (a dict, then orjson)."""

    def body() -> bytes:
        response = _response(settings, page, Timings())
        dump = encoder == "pydantic"
        content = serialize_response(field=route.response_field, response_content=response, dump_json=dump)
        content = loop.run_until_complete(content)
        return bytes(content) if dump else orjson.dumps(content)

    return body


def decode_rows(jpeg: bytes, settings: ServeSettings, prep: Preprocessing, repeats: int) -> list[tuple[str, float]]:
    """The service's decode + preprocess (``decode_query``) of ``jpeg`` under each setting of its path."""
    paths = {
        "full decode, whole resize (torchvision's path; draft_decode off)": {"draft_decode": False},
        "draft decode (the default)": {},
        "draft decode + region resize (region_resize on)": {"region_resize": True},
    }
    rows = []
    for name, flags in paths.items():
        changed = settings.model_copy(update=flags)
        rows.append(
            (f"decode + preprocess, {name}", cpu_ms(lambda s=changed: decode_query(jpeg, "q", s, prep), repeats))
        )
    return rows


def stage_table(index_dir: Path, jpeg: bytes, repeats: int) -> list[tuple[str, float]]:
    settings = ServeSettings(index_dir=index_dir, threads=THREADS, batch_max_size=BATCH)
    app = create_app(settings)
    services = app.state.services
    route = next(r for r in routes_search.router.routes if isinstance(r, APIRoute) and r.path == "/search")
    snapshot = open_snapshot(settings, 0)
    loop = asyncio.new_event_loop()  # one loop for all runs: asyncio.run() would time creating loops
    try:
        prep = snapshot.embedder.manifest.preprocessing
        image = open_rgb_bytes(jpeg, max_pixels=settings.max_pixels, name="q")
        pixels = np.asarray(resize_and_crop(image, prep))
        one = decode_query(jpeg, "q", settings, prep)
        vector = snapshot.embedder.embed_arrays(one[None])[0]
        search = settings_of(services, SearchOptions(10))
        queries = [Query.embedded(vector)]

        def found() -> list[FoundPage]:
            return shown(snapshot.store_thread.submit(search_store, snapshot.store, queries, search).result(), services)

        body = response_body(route, search, found()[0], loop)
        rows = [
            ("multipart parsing (starlette + python-multipart)", cpu_ms(multipart_parse(jpeg, loop), repeats)),
            (
                f"JPEG decode alone (open_rgb_bytes, {image.width} x {image.height})",
                cpu_ms(lambda: open_rgb_bytes(jpeg, max_pixels=settings.max_pixels, name="q"), repeats),
            ),  # fmt: skip
            ("resize + centre crop alone (resize_and_crop)", cpu_ms(lambda: resize_and_crop(image, prep), repeats)),
            ("normalise alone (normalize_pixels)", cpu_ms(lambda: normalize_pixels(pixels, prep), repeats)),
            *decode_rows(jpeg, settings, prep, repeats),
            (
                f"batch assembly (np.stack of {BATCH}, per image)",
                cpu_ms(lambda: np.stack([one] * BATCH), repeats, BATCH),
            ),  # fmt: skip
            (
                f"store search k=10 + item rows + hits (search_store, faiss on {settings.search_threads} thread)",
                cpu_ms(found, repeats),
            ),  # fmt: skip
        ]
        rows.append(
            ("response model + FastAPI validation + JSON (pydantic-core, FastAPI's own)", cpu_ms(body, repeats))
        )
        orjson_body = response_body(route, search, found()[0], loop, "orjson")
        rows.append(("response model + FastAPI validation + JSON (a dict, then orjson)", cpu_ms(orjson_body, repeats)))
        batch = np.stack([one] * BATCH)
        embed = snapshot.embedder.embed_arrays
        rows.append(("ONNX, batch of 1 (per image)", cpu_ms(lambda: embed(one[None]), repeats // 2 + 1)))
        rows.append((f"ONNX, batch of {BATCH} (per image)", cpu_ms(lambda: embed(batch), max(2, repeats // 10), BATCH)))
        return rows
    finally:
        loop.close()
        snapshot.embedder.close()
        snapshot.store_thread.submit(snapshot.store.close).result()
        snapshot.store_thread.shutdown()


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


def resized_jpegs(jpegs: list[bytes], size: str) -> list[bytes]:
    """The queries as JPEGs of ``WxH`` (quality 90), as a client would upload them."""
    width, height = (int(side) for side in size.lower().split("x"))
    out = []
    for data in jpegs:
        buffer = io.BytesIO()
        Image.open(io.BytesIO(data)).convert("RGB").resize((width, height)).save(buffer, "JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--alone-requests", type=int, default=60, help="requests of the one-client run")
    parser.add_argument("--gallery", type=int, default=200, help="gallery images (10 per class)")
    parser.add_argument("--image-size", type=int, default=224, help="the model's input size in px")
    parser.add_argument("--query-size", default="500x375", help="WxH of the query JPEGs, e.g. 4032x3024 (a phone)")
    args = parse_quick(parser, repeats=3, clients=2, requests=8, alone_requests=4, gallery=20, image_size=64)
    with tempfile.TemporaryDirectory() as tmp_name:
        model_dir, index_dir, jpegs = build_fixture(Path(tmp_name), args.gallery, args.image_size)
        jpegs = resized_jpegs(jpegs[:8], args.query_size) if args.query_size != "500x375" else jpegs
        rows = stage_table(index_dir, jpegs[0], args.repeats)
        alone = service_timings(index_dir, jpegs, 1, args.alone_requests)
        loaded = service_timings(index_dir, jpegs, args.clients, args.requests)
    print(f"resnet18 ONNX {args.image_size} px, {THREADS} threads, gallery {args.gallery}")
    print(f"1. CPU per request by stage (ms, median of {args.repeats}; JPEG of {len(jpegs[0])} bytes)")
    print("| stage | CPU ms |\n|---|---|")
    print("\n".join(f"| {name} | {value:.2f} |" for name, value in rows))
    print("\n2. the service's timings (medians, ms)")
    print(f"| timing | 1 client | {args.clients} clients |\n|---|---|---|")
    print("\n".join(f"| {key} | {alone[key]:.1f} | {loaded[key]:.1f} |" for key in alone))


if __name__ == "__main__":
    main()
