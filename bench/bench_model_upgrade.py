"""A model upgrade under load (issue 23): searches must keep answering while `retrieval index rebuild
--model NEW` re-embeds the demo's index and switches, and after the service's reload it serves the new
model. Not run in CI.

The demo's index, as ``scripts/demo.sh`` makes it: the generated dataset (40 classes x 30 images of 64 px),
its test half (20 classes, 600 images) indexed with a resnet18 at 64 px (random weights: the speeds and
failures measured here do not depend on them); the new model is the same network with other weights.
``--clients`` clients search closed-loop throughout and a writer adds an image every
``--write-every`` seconds, while ``retrieval index rebuild`` runs in its own process; when it returns,
``POST /admin/reload``. Reported per phase (before, rebuild + switch, switch -> reload, after the
reload): searches and their failures, latency, and the writes (a write between the switch and the
reload is refused with 409, "reload, then retry", and retried).

    python bench/bench_model_upgrade.py [--clients 4] [--before 5] [--after 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
from bench_models import export_resnet18
from quick_mode import parse_quick
from serving_server import THREADS, Variant, free_port, query_jpegs, start_server

from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.build.builder import build_index

API_KEY = "upgrade-key-0123456789"
IMAGE_PX = 64
RETRIEVAL = [sys.executable, "-c", "from retrieval.cli.main import main; main()"]
PHASES = ("before", "rebuild + switch", "switch -> reload", "after reload")


@dataclass
class Phase:
    latencies_s: list[float] = field(default_factory=list)
    failures: Counter = field(default_factory=Counter)
    writes: Counter = field(default_factory=Counter)


@dataclass
class Run:
    phase: str = PHASES[0]
    phases: dict[str, Phase] = field(default_factory=lambda: {name: Phase() for name in PHASES})
    stop: bool = False

    @property
    def current(self) -> Phase:
        return self.phases[self.phase]


async def _searcher(http: httpx.AsyncClient, jpegs: list[bytes], run: Run) -> None:
    n = 0
    while not run.stop:
        phase, started = run.current, time.perf_counter()
        try:
            answer = await http.post("/search", files={"image": ("q.jpg", jpegs[n % len(jpegs)], "image/jpeg")})
            status = str(answer.status_code)
        except httpx.HTTPError as error:
            status = type(error).__name__
        if status == "200":
            phase.latencies_s.append(time.perf_counter() - started)
        else:
            phase.failures[status] += 1
        n += 1


async def _writer(http: httpx.AsyncClient, jpegs: list[bytes], run: Run, every_s: float) -> None:
    n = 0
    while not run.stop:
        await asyncio.sleep(every_s)
        files = [("image", (f"w{n}.jpg", jpegs[n % len(jpegs)], "image/jpeg"))]
        headers = {"X-API-Key": API_KEY, "Idempotency-Key": f"write-{n}"}
        for _ in range(100):  # a 409 means "reload, then retry": retried until the reload happened
            phase = run.current
            answer = await http.post("/items", files=files, data={"label": "written"}, headers=headers)
            phase.writes[str(answer.status_code)] += 1
            if answer.status_code != 409:
                break
            await asyncio.sleep(0.2)
        n += 1


async def upgrade_under_load(port: int, index_dir: Path, new_model: Path, jpegs: list[bytes], args) -> tuple[Run, dict]:
    run = Run()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
        tasks = [asyncio.create_task(_searcher(http, jpegs, run)) for _ in range(args.clients)]
        tasks.append(asyncio.create_task(_writer(http, jpegs, run, args.write_every)))
        await asyncio.sleep(args.before)
        run.phase = PHASES[1]
        started = time.perf_counter()
        rebuild = await asyncio.create_subprocess_exec(
            "nice",
            "-n",
            "10",
            *RETRIEVAL,
            "index",
            "rebuild",
            str(index_dir),
            "--model",
            str(new_model),
            "--quiet",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await rebuild.communicate()
        rebuild_s = time.perf_counter() - started
        run.phase = PHASES[2]
        await asyncio.sleep(args.reload_after)
        reloaded = await http.post("/admin/reload", headers={"X-API-Key": API_KEY})
        run.phase = PHASES[3]
        await asyncio.sleep(args.after)
        run.stop = True
        await asyncio.gather(*tasks)
        served = (await http.get("/readyz")).json()
    facts = {
        "rebuild_s": rebuild_s,
        "rebuild_code": rebuild.returncode,
        "rebuild_output": (out + err).decode().strip(),
        "reload_status": reloaded.status_code,
        "served_model": served["model_sha256"],
        "served_count": served["count"],
    }
    return run, facts


def build(tmp: Path, classes: int, per_class: int) -> tuple[Path, Path, list[bytes]]:
    export_resnet18(tmp / "old", image_size=IMAGE_PX)
    export_resnet18(tmp / "new", image_size=IMAGE_PX, seed=1)
    generate_synthetic_dataset(
        tmp / "data", classes=classes, per_class=per_class, size=IMAGE_PX, seed=0, progress=False
    )
    records = select_split(load_records(tmp / "data"), "test")
    build_index(tmp / "old", records, tmp / "index", threads=THREADS, progress=False)
    return tmp / "index", tmp / "new", query_jpegs(records, 32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--before", type=float, default=5.0, help="seconds of load before the rebuild")
    parser.add_argument("--reload-after", type=float, default=2.0, help="seconds between the switch and the reload")
    parser.add_argument("--after", type=float, default=5.0, help="seconds of load after the reload")
    parser.add_argument("--write-every", type=float, default=1.0)
    parser.add_argument("--classes", type=int, default=40, help="generated classes (the demo's; half are indexed)")
    parser.add_argument("--per-class", type=int, default=30, help="generated images per class (the demo's)")
    args = parse_quick(
        parser, clients=1, before=0.5, reload_after=0.3, after=0.5, write_every=0.3, classes=4, per_class=5
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        index_dir, new_model, jpegs = build(Path(tmp_name), args.classes, args.per_class)
        items = len(load_records(Path(tmp_name) / "data")) // 2
        port = free_port()
        server = start_server(index_dir, port, Variant("upgrade", env={"RETRIEVAL_API_KEY": API_KEY}))
        try:
            run, facts = asyncio.run(upgrade_under_load(port, index_dir, new_model, jpegs, args))
        finally:
            server.terminate()
            server.wait(timeout=60)
        verified = subprocess.run([*RETRIEVAL, "index", "verify", str(index_dir)], capture_output=True, text=True)
        new_sha = OnnxEmbedder(new_model).model_sha256
    report(run, facts, args, items, new_sha, verified)


def report(run: Run, facts: dict, args, items: int, new_sha: str, verified: subprocess.CompletedProcess) -> None:
    print(
        f"model upgrade under load: the demo's index ({items} items, resnet18 {IMAGE_PX} px) rebuilt with other "
        f"weights while {args.clients} clients search and a writer adds an image every {args.write_every:g} s; "
        f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print("| phase | searches | failed | p50 / p99 ms | writes (status: count) |")
    print("|---|---|---|---|---|")
    for name in PHASES:
        phase = run.phases[name]
        done = len(phase.latencies_s) + sum(phase.failures.values())
        latencies = np.asarray(phase.latencies_s) * 1000.0 if phase.latencies_s else np.zeros(1)
        failed = ", ".join(f"{status}: {count}" for status, count in sorted(phase.failures.items())) or "0"
        writes = ", ".join(f"{status}: {count}" for status, count in sorted(phase.writes.items())) or "-"
        print(
            f"| {name} | {done} | {failed} | {np.percentile(latencies, 50):.0f} / {np.percentile(latencies, 99):.0f} "
            f"| {writes} |"
        )
    total_failed = sum(sum(phase.failures.values()) for phase in run.phases.values())
    print(
        f"\nrebuild + switch: {facts['rebuild_s']:.1f} s (exit {facts['rebuild_code']}); reload: "
        f"{facts['reload_status']}; served model after the reload is the new one: {facts['served_model'] == new_sha}; "
        f"items served {facts['served_count']}; failed searches in all: **{total_failed}**"
    )
    print(f"rebuild said: {facts['rebuild_output']}")
    print(f"index verify: exit {verified.returncode}: {(verified.stdout + verified.stderr).strip()}")


if __name__ == "__main__":
    main()
