"""The service's ASGI middlewares, outermost last in ``app._add_middleware``.

- ``MetricsMiddleware`` counts and times every request by route template and method.
- ``BodySizeLimit`` refuses a body over the limit (413) before multipart parsing spools it.
- ``AllowedMethods`` answers ``OPTIONS`` with every method the path accepts, and lists them all in
  the ``Allow`` header of a 405 (the router alone names only the first route matching the path). A path
  that a route names literally (``/items/delete``) is that route's alone: ``/items/{item_id}`` does not
  lend it GET and DELETE, which answer 405 there (they answered 422, "delete" not being an id).
- ``UnexpectedErrors`` answers an error no handler answers with a 500 problem and ends it there, so the
  keep-alive connection stays usable (Starlette's own handler re-raises, and uvicorn then drops it).
- ``RequestTimeout`` cancels a request that runs longer than the limit and answers 504. Work
  already handed to a thread (an onnxruntime call) cannot be interrupted; it finishes in the
  background and its result is dropped. Health, readiness and metrics are never timed out, so a
  busy service still answers its probes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retrieval.serving.http.json_bodies import is_json
from retrieval.serving.http.problems import problem_response, status_for, unexpected_problem
from retrieval.serving.http.prometheus import ServiceMetrics
from retrieval.serving.http.service_errors import PayloadTooLargeError, RequestTimeoutError

EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# Metric label values are bounded: a method a client invents is counted as "other".
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class AllowedMethods:
    """``OPTIONS`` on a path answers 204 with ``Allow``: every method of every route with that path.

    It sits inside CORS (when CORS is on), so a browser's preflight is still answered by CORS; it
    answers before routing, so no dependency (the API-key check) runs for it. Requests with other
    methods pass through untouched, except that a 405 gets the complete ``Allow`` header; a method that no
    route of a literal path serves is answered 405 here."""

    def __init__(self, app: ASGIApp, routes: Iterable[BaseRoute]):
        self.app = app
        self.routes = [route for route in routes if hasattr(route, "path_regex")]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matching = self._matching(scope["path"]) if scope["type"] == "http" else []
        if not matching:
            await self.app(scope, receive, send)
            return
        literal = [route for route in matching if not getattr(route, "param_convertors", True)]
        matching = literal or matching
        methods = set().union(*map(_methods, matching)) | {"OPTIONS"}
        allow = ", ".join(sorted(methods))
        if scope["method"] == "OPTIONS":
            scope["route"] = matching[0]  # metrics count it under the route's template
            await Response(status_code=204, headers={"Allow": allow})(scope, receive, send)
            return
        if literal and scope["method"] not in methods:
            detail = f"{scope['method']} is not a method of {scope['path']}; it takes {allow}."
            await problem_response(405, detail, headers={"Allow": allow})(scope, receive, send)
            return

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                MutableHeaders(scope=message)["Allow"] = allow
            await send(message)

        await self.app(scope, receive, send_with_allow)

    def _matching(self, path: str) -> list[BaseRoute]:
        return [route for route in self.routes if route.path_regex.match(path)]


def _methods(route: BaseRoute) -> set[str]:
    """A route's methods; a mount (the static files) serves GET and HEAD."""
    return set(getattr(route, "methods", None) or ({"GET", "HEAD"} if isinstance(route, Mount) else ()))


class RequestTimeout:
    def __init__(self, app: ASGIApp, timeout_s: float):
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        send_tracking, started = _tracking_start(send)
        try:
            await asyncio.wait_for(self.app(scope, receive, send_tracking), self.timeout_s)
        except asyncio.TimeoutError:
            if started():  # headers are out; all we can do is end the response
                raise
            detail = f"the request took longer than the limit of {self.timeout_s:g} s; retry, or send a smaller image."
            await problem_response(status_for(RequestTimeoutError), detail)(scope, receive, send)


def _tracking_start(send: Send) -> tuple[Send, Callable[[], bool]]:
    """``send`` that remembers whether the response has started (its headers are out)."""
    started = False

    async def send_tracking(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    return send_tracking, lambda: started


class UnexpectedErrors:
    """An exception that no handler answered becomes a 500 problem here and goes no further. Starlette's
    handler for ``Exception`` (in its ``ServerErrorMiddleware``) answers and then re-raises, and uvicorn,
    seeing the error after a response, closes the connection: a client's next request on that keep-alive
    connection failed with a reset. An error after the response started can only end it, as before."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send_tracking, started = _tracking_start(send)
        try:
            await self.app(scope, receive, send_tracking)
        except Exception as error:
            if started():
                raise
            await unexpected_problem(error)(scope, receive, send)


class BodySizeLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` (a JSON body: ``json_max_bytes``, when given) before
    anything parses them (413)."""

    def __init__(self, app: ASGIApp, max_bytes: int, json_max_bytes: int | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.json_max_bytes = json_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        json = self.json_max_bytes is not None and is_json(scope)
        limit = self.json_max_bytes if json and self.json_max_bytes is not None else self.max_bytes
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await problem_response(status_for(PayloadTooLargeError), _sentence(limit, json))(scope, receive, send)
            return
        await self.app(scope, self._counting(receive, limit, json), send)

    def _counting(self, receive: Receive, limit: int, json: bool) -> Receive:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:  # chunked bodies have no Content-Length to check up front
                raise StarletteHTTPException(413, _sentence(limit, json))
            return message

        return counted


def _sentence(limit: int, json: bool) -> str:
    smaller = "send fewer vectors at a time" if json else "send a smaller image"
    return f"the request body is larger than the limit of {limit} bytes; {smaller}."


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
