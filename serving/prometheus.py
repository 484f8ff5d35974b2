"""Prometheus metrics of one app: requests by route and status, latencies, batch sizes, index size.

Each app gets its own registry, so several apps (tests, workers) never collide. The
route label is the route's template (``/items/{item_id}``), never the raw path, so a
client cannot blow up the number of series. With ``--workers N`` every worker process
has its own counters; scrape the pods/processes, or run one worker per container.
"""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "retrieval_http_requests", "HTTP requests by route, method and status", ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "retrieval_http_request_seconds", "HTTP request latency by route", ["route", "method"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.batch_size = Histogram(
            "retrieval_embed_batch_size", "images per onnxruntime call", buckets=BATCH_BUCKETS, registry=self.registry
        )
        self.index_items = Gauge("retrieval_index_items", "items in the served index", registry=self.registry)
        self.index_generation = Gauge("retrieval_index_generation", "reloads of the served index", registry=self.registry)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """ASGI middleware: count and time every HTTP request by its route template."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def send_recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_recording)
        finally:
            route = _route_template(scope)
            method = scope.get("method", "")
            self.metrics.requests.labels(route, method, str(status["code"])).inc()
            self.metrics.latency.labels(route, method).observe(time.perf_counter() - start)


def _route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"
