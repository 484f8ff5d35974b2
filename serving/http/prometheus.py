"""Prometheus metrics of one app: requests by route and status, latencies, batch sizes, index size.

Each app gets its own registry, so several apps (tests, workers) never collide. The
route label is the route's template (``/items/{item_id}``), never the raw path, so a
client cannot blow up the number of series. With ``--workers N`` every worker process
has its own counters; scrape the pods/processes, or run one worker per container.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "retrieval_http_requests",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "retrieval_http_request_seconds",
            "HTTP request latency by route",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "retrieval_embed_batch_size", "images per onnxruntime call", buckets=BATCH_BUCKETS, registry=self.registry
        )
        self.index_items = Gauge("retrieval_index_items", "items in the served index", registry=self.registry)
        self.index_generation = Gauge(
            "retrieval_index_generation", "reloads of the served index", registry=self.registry
        )

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
