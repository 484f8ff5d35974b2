"""Load generators for ``POST /search`` and the CPU time they and the server spend per request.

Two clients, both asyncio in the benchmark's own process (the server is another process):

- ``httpx``: ``httpx.AsyncClient.post(files=...)``, what the benchmark used first. It builds the
  multipart body and parses the response for every request: about 5 ms of CPU per request here,
  taken from the same two cores the server runs on.
- ``raw``: every request's bytes (HTTP/1.1 head + multipart body) are encoded once before the
  load; each client keeps one connection, writes a request, reads the status line, the headers
  and ``Content-Length`` bytes of body. About 0.2 ms of CPU per request.

Imported by ``bench_serving_load.py`` (``python bench/x.py`` puts ``bench/`` on the path).
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import numpy as np

BOUNDARY = "retrieval-bench-boundary"


@dataclass
class LoadResult:
    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    client_cpu_s: float = 0.0  # the load generator's own CPU time during the load
    bodies: list[bytes] = field(default_factory=list)  # response bodies, when asked to keep them

    @property
    def rate(self) -> float:
        return len(self.latencies_s) / self.seconds if self.seconds else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(np.asarray(self.latencies_s) * 1000.0, q)) if self.latencies_s else 0.0


def search_request(jpeg: bytes, port: int, k: int = 10) -> bytes:
    """The complete bytes of one ``POST /search?k=`` request with ``jpeg`` as the ``image`` field."""
    body = (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="q.jpg"\r\n'
            "Content-Type: image/jpeg\r\n\r\n"
        ).encode()
        + jpeg
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    head = (
        f"POST /search?k={k} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _raw_exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bytes | None:
    """Send one request, read its response; the body of a 200, None for any other status."""
    writer.write(request)
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length)
    return body if status.startswith(b"HTTP/1.1 200") else None


async def _drive(clients: int, requests: int, seconds: float, session: Callable[..., Awaitable[None]]) -> LoadResult:
    """Run ``clients`` copies of ``session(next_request, record)`` until ``requests`` or ``seconds``."""
    result, issued = LoadResult(), 0
    deadline = time.monotonic() + seconds

    def next_request() -> int | None:
        nonlocal issued
        if issued >= requests or time.monotonic() >= deadline:
            return None
        issued += 1
        return issued - 1

    def record(started: float, ok: bool) -> None:
        result.latencies_s.append(time.perf_counter() - started)
        result.errors += not ok

    cpu, started = _own_cpu_s(), time.perf_counter()
    await asyncio.gather(*(session(next_request, record) for _ in range(clients)))
    result.seconds, result.client_cpu_s = time.perf_counter() - started, _own_cpu_s() - cpu
    return result


async def raw_load(
    port: int, jpegs: list[bytes], clients: int, requests: int, seconds: float, keep_bodies: bool = False
) -> LoadResult:
    encoded = [search_request(jpeg, port) for jpeg in jpegs]
    kept: list[bytes] = []

    async def session(next_request: Callable[[], int | None], record: Callable[[float, bool], None]) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while (i := next_request()) is not None:
                started = time.perf_counter()
                try:
                    body = await _raw_exchange(reader, writer, encoded[i % len(encoded)])
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    body = None
                ok = body is not None
                record(started, ok)
                if keep_bodies and body is not None:
                    kept.append(body)
                if not ok:
                    break  # the connection state is unknown after an error
        finally:
            writer.close()

    result = await _drive(clients, requests, seconds, session)
    result.bodies = kept
    return result


async def httpx_load(port: int, jpegs: list[bytes], clients: int, requests: int, seconds: float) -> LoadResult:
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60, limits=limits) as http:

        async def session(next_request: Callable[[], int | None], record: Callable[[float, bool], None]) -> None:
            while (i := next_request()) is not None:
                started = time.perf_counter()
                files = {"image": ("q.jpg", jpegs[i % len(jpegs)], "image/jpeg")}
                try:
                    ok = (await http.post("/search", params={"k": 10}, files=files)).status_code == 200
                except httpx.HTTPError:
                    ok = False
                record(started, ok)

        return await _drive(clients, requests, seconds, session)


LOADS = {"raw": raw_load, "httpx": httpx_load}


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu_s(pid: int, thread: int | None = None) -> float | None:
    """CPU seconds (user + system) of a process, or of one of its threads; None off Linux."""
    path = f"/proc/{pid}/task/{thread}/stat" if thread is not None else f"/proc/{pid}/stat"
    try:
        fields = open(path).read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class OpenLoopResult:
    """Requests sent at a fixed rate whatever the answers: every outcome with its latency."""

    offered_per_s: float
    seconds: float = 0.0
    accepted_s: list[float] = field(default_factory=list)  # latencies of the 200s
    refused_s: list[float] = field(default_factory=list)  # latencies of the 503s and 429s with Retry-After
    refused_without_retry_after: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # any other status, "timeout", "connection"

    @property
    def sent(self) -> int:
        return len(self.accepted_s) + len(self.refused_s) + self.refused_without_retry_after + sum(self.errors.values())

    def accepted_percentile_ms(self, q: float) -> float:
        return float(np.percentile(np.asarray(self.accepted_s) * 1000.0, q)) if self.accepted_s else 0.0


async def open_loop_load(
    port: int, jpegs: list[bytes], rate: float, seconds: float, timeout_s: float
) -> OpenLoopResult:
    """``POST /search`` at ``rate`` requests per second for ``seconds``, each on its own connection and
    not waiting for earlier answers (open loop: arrivals do not slow down when the server does)."""
    encoded = [search_request(jpeg, port) for jpeg in jpegs]
    result = OpenLoopResult(rate)

    async def one(request: bytes) -> None:
        started = time.perf_counter()
        try:
            status, headers = await asyncio.wait_for(_status_and_headers(port, request), timeout_s)
        except asyncio.TimeoutError:
            result.errors["timeout"] = result.errors.get("timeout", 0) + 1
            return
        except (OSError, asyncio.IncompleteReadError, ValueError):
            result.errors["connection"] = result.errors.get("connection", 0) + 1
            return
        latency = time.perf_counter() - started
        if status == 200:
            result.accepted_s.append(latency)
        elif status in (429, 503) and b"retry-after" in headers:
            result.refused_s.append(latency)
        elif status in (429, 503):
            result.refused_without_retry_after += 1
        else:
            result.errors[str(status)] = result.errors.get(str(status), 0) + 1

    tasks, sent, started = [], 0, time.monotonic()
    while time.monotonic() - started < seconds:
        due = started + sent / rate
        if due > time.monotonic():
            await asyncio.sleep(due - time.monotonic())
        tasks.append(asyncio.create_task(one(encoded[sent % len(encoded)])))
        sent += 1
    await asyncio.gather(*tasks)
    result.seconds = time.monotonic() - started
    return result


async def _status_and_headers(port: int, request: bytes) -> tuple[int, dict[bytes, bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        status = int((await reader.readline()).split()[1])
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        await reader.readexactly(int(headers.get(b"content-length", b"0")))
        return status, headers
    finally:
        writer.close()


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (VmRSS), 0 when it cannot be read."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
