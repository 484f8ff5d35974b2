"""The service's ASGI middlewares, outermost last in ``app._add_middleware``.

- ``MetricsMiddleware`` counts and times every request by route template and method.
- ``BodySizeLimit`` refuses a body over the limit (413) before multipart parsing spools it.
- ``RequestTimeout`` cancels a request that runs longer than the limit and answers 504. Work
  already handed to a thread (an onnxruntime call) cannot be interrupted; it finishes in the
  background and its result is dropped. Health, readiness and metrics are never timed out, so a
  busy service still answers its probes.
"""

from __future__ import annotations

import asyncio
import time

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retrieval.serving.problems import problem_response
from retrieval.serving.prometheus import ServiceMetrics

EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# Metric label values are bounded: a method a client invents is counted as "other".
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestTimeout:
    def __init__(self, app: ASGIApp, timeout_s: float):
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await asyncio.wait_for(self.app(scope, receive, send_tracking), self.timeout_s)
        except asyncio.TimeoutError:
            if started:  # headers are out; all we can do is end the response
                raise
            detail = f"the request took longer than the limit of {self.timeout_s:g} s; retry, or send a smaller image."
            await problem_response(504, detail)(scope, receive, send)


class BodySizeLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` before anything parses them (413)."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await problem_response(413, self._sentence())(scope, receive, send)
            return
        await self.app(scope, self._counting(receive), send)

    def _counting(self, receive: Receive) -> Receive:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:  # chunked bodies have no Content-Length to check up front
                raise StarletteHTTPException(413, self._sentence())
            return message

        return counted

    def _sentence(self) -> str:
        return f"the request body is larger than the limit of {self.max_bytes} bytes; send a smaller image."


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
            method = method if method in KNOWN_METHODS else "other"
            self.metrics.requests.labels(route, method, str(status["code"])).inc()
            self.metrics.latency.labels(route, method).observe(time.perf_counter() - start)


def _route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"
