"""The search service as the serving benchmarks run it: a generated gallery indexed with a random-weights
resnet18, and ``uvicorn`` started in a subprocess with the thread settings ``retrieval serve`` sets.

Imported by ``bench_serving_load.py``, ``overload_protocol.py``, ``bench_soak.py`` and
``bench_model_upgrade.py`` (``python bench/x.py`` puts ``bench/`` on the path).
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from bench_models import export_resnet18
from PIL import Image

from retrieval.cli.thread_env import apply_thread_env_defaults
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.store.build.builder import build_index

THREADS = 2
BATCH = 16


def build_fixture(tmp: Path, gallery: int, image_size: int = 224) -> tuple[Path, Path, list[bytes]]:
    """(model dir, index dir, 64 query JPEGs): the exported model (``image_size`` px input), an index over
    ``gallery`` generated images."""
    model_dir = tmp / "export"
    export_resnet18(model_dir, image_size=image_size)
    generate_synthetic_dataset(tmp / "data", classes=max(1, gallery // 10), per_class=10, size=128, progress=False)
    records = load_records(tmp / "data")
    build_index(model_dir, records, tmp / "index", threads=THREADS, progress=False)
    return model_dir, tmp / "index", query_jpegs(records, 64)


def query_jpegs(records, count: int) -> list[bytes]:
    """JPEG bytes of gallery images at a photo-like 500x375, as a client would upload."""
    payloads = []
    for record in records[:count]:
        buffer = io.BytesIO()
        Image.open(record.path).convert("RGB").resize((500, 375)).save(buffer, "JPEG", quality=90)
        payloads.append(buffer.getvalue())
    return payloads


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Variant:
    name: str
    client: str = "raw"  # a key of load_clients.LOADS
    env: dict[str, str] = field(default_factory=dict)  # extra RETRIEVAL_* settings of the server
    source: Path | None = None  # run the server from this source tree (PYTHONPATH) instead of this one


def start_server(index_dir: Path, port: int, variant: Variant, omp_wait_policy: str = "PASSIVE") -> subprocess.Popen:
    threads_env = dict(os.environ)
    if omp_wait_policy != "unset":  # what `retrieval serve` sets (cli/thread_env.py), OMP_WAIT_POLICY as given
        apply_thread_env_defaults(threads_env)
        threads_env["OMP_WAIT_POLICY"] = omp_wait_policy
    env = {
        **threads_env,
        "RETRIEVAL_INDEX_DIR": str(index_dir),
        "RETRIEVAL_THREADS": str(THREADS),
        "RETRIEVAL_BATCH_MAX_SIZE": str(BATCH),
        "RETRIEVAL_BATCH_MAX_WAIT_MS": "4",
        **variant.env,
    }
    if variant.source is not None:
        env["PYTHONPATH"] = str(variant.source)
    command = [sys.executable, "-m", "uvicorn", "retrieval.serving.app:app_from_env", "--factory"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
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
