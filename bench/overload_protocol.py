"""``bench_serving_load.py --overload F``: the service at F times its saturation rate, with and without
the bound on queued images (``max_queued_images``).

For each variant a fresh server: a closed-loop run (``--clients`` clients, ``--requests`` requests, raw
client) finds the saturation rate and the p99 latency there; then requests arrive open-loop, each on
its own connection, at F times that rate for ``--overload-seconds`` (arrivals do not slow down when the
server does, as with real users), while the server's RSS is sampled. Targets (issue 23): accepted
requests' p99 within 2x the saturation p99, RSS flat, every refused request a 503/429 with Retry-After,
never a timeout or a 500. The unbounded variant (``max_queued_images`` 1,000,000: the queue as it was)
shows what the bound prevents.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from load_clients import LOADS, OpenLoopResult, open_loop_load, rss_bytes
from serving_server import Variant, free_port, start_server

MB = 1 << 20
VARIANTS = (
    Variant("bounded (max_queued_images 24, the default)"),
    Variant("unbounded (max_queued_images 1,000,000)", env={"RETRIEVAL_MAX_QUEUED_IMAGES": "1000000"}),
)


@dataclass
class RssSampler:
    """The RSS of a process every ``period_s`` on a thread, while running."""

    pid: int
    period_s: float = 0.25
    samples: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> RssSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(rss_bytes(self.pid))
            time.sleep(self.period_s)


@dataclass
class OverloadRun:
    variant: Variant
    saturation_rate: float
    saturation_p50_ms: float
    saturation_p99_ms: float
    saturation_errors: int
    rss_before: int
    overload: OpenLoopResult
    rss: list[int]


def run_overload(index_dir: Path, jpegs: list[bytes], args: argparse.Namespace) -> list[OverloadRun]:
    return [_one(index_dir, jpegs, variant, args) for variant in VARIANTS]


def _one(index_dir: Path, jpegs: list[bytes], variant: Variant, args: argparse.Namespace) -> OverloadRun:
    port = free_port()
    env = {"RETRIEVAL_REQUEST_TIMEOUT_S": str(args.timeout), **variant.env}
    server = start_server(index_dir, port, Variant(variant.name, env=env), args.omp_wait_policy)
    try:
        asyncio.run(LOADS["raw"](port, jpegs, 3, 32, args.seconds))  # warm-up
        closed = asyncio.run(LOADS["raw"](port, jpegs, args.clients, args.requests, args.seconds))
        rss_before = rss_bytes(server.pid)
        rate = args.overload * closed.rate
        with RssSampler(server.pid) as sampler:
            opened = asyncio.run(open_loop_load(port, jpegs, rate, args.overload_seconds, args.timeout + 30))
    finally:
        server.terminate()
        server.wait(timeout=60)
    return OverloadRun(
        variant,
        closed.rate,
        closed.percentile_ms(50),
        closed.percentile_ms(99),
        closed.errors,
        rss_before,
        opened,
        sampler.samples,
    )


def table(runs: list[OverloadRun], factor: float) -> list[str]:
    lines = [
        f"| variant | saturation req/s | p50 / p99 ms at saturation | offered req/s ({factor:g}x) | accepted req/s "
        "| accepted p50 / p99 ms | p99 / saturation p99 | refused (503/429 + Retry-After) | refused without "
        "Retry-After | other errors | server RSS MB: after saturation; overload at 1/4, 1/2, 3/4, end (max) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        load = run.overload
        ratio = load.accepted_percentile_ms(99) / run.saturation_p99_ms if run.saturation_p99_ms else 0.0
        errors = ", ".join(f"{kind}: {count}" for kind, count in sorted(load.errors.items())) or "0"
        rss = run.rss or [0]
        lines.append(
            f"| {run.variant.name} | {run.saturation_rate:.1f} | {run.saturation_p50_ms:.0f} / "
            f"{run.saturation_p99_ms:.0f} | {load.offered_per_s:.1f} | {len(load.accepted_s) / load.seconds:.1f} | "
            f"{load.accepted_percentile_ms(50):.0f} / {load.accepted_percentile_ms(99):.0f} | **{ratio:.2f}x** | "
            f"{len(load.refused_s)} of {load.sent} | {load.refused_without_retry_after} | {errors} | "
            f"{run.rss_before / MB:.0f}; {_quarters(rss)} ({max(rss) / MB:.0f}) |"
        )
    return lines


def _quarters(samples: list[int]) -> str:
    points = [samples[min(len(samples) - 1, round(q * (len(samples) - 1)))] for q in (0.25, 0.5, 0.75, 1.0)]
    return ", ".join(f"{point / MB:.0f}" for point in points)
