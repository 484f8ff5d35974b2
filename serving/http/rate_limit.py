"""A per-client token bucket (``rate_limit_per_s``, ``rate_limit_burst``): 429 with Retry-After.

Each client (the connection's IP address; behind a proxy that is the proxy, so limit there instead) has
a bucket of ``burst`` tokens refilled at ``rate`` per second; a request takes one, and a request that
finds none is answered 429 before routing, with the seconds until a token is back. Probes and metrics
are never limited. The buckets of the most recent ``MAX_CLIENTS`` clients are kept, so memory stays
bounded whatever the number of addresses (a forgotten client starts with a full bucket).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict

from starlette.types import ASGIApp, Receive, Scope, Send

from retrieval.serving.http.middleware import EXEMPT_PATHS
from retrieval.serving.http.problems import problem_response, status_for
from retrieval.serving.http.service_errors import RateLimitedError

MAX_CLIENTS = 10_000


class TokenBuckets:
    """Buckets by client key: ``take`` returns 0 when a token was taken, else the seconds to wait."""

    def __init__(self, rate: float, burst: int, max_clients: int = MAX_CLIENTS) -> None:
        self.rate, self.burst, self.max_clients = rate, burst, max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, time)

    def take(self, key: str, now: float) -> float:
        tokens, then = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens - 1.0 if wait == 0.0 else tokens, now)
        if len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return wait


class RateLimit:
    """ASGI middleware: a request of a client whose bucket is empty gets 429 before anything runs."""

    def __init__(self, app: ASGIApp, rate: float, burst: int) -> None:
        self.app = app
        self.buckets = TokenBuckets(rate, burst)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        wait = self.buckets.take(client[0] if client else "", time.monotonic())
        if wait == 0.0:
            await self.app(scope, receive, send)
            return
        detail = (
            f"this client sent more than {self.buckets.burst} requests at once or {self.buckets.rate:g} per second "
            "on average (the server's rate_limit_burst and rate_limit_per_s); retry after the Retry-After seconds."
        )
        headers = {"Retry-After": str(max(1, math.ceil(wait)))}
        await problem_response(status_for(RateLimitedError), detail, headers=headers)(scope, receive, send)
