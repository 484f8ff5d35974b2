"""ASGI middleware: a request that runs longer than the limit is cancelled and answered with 504.

Work already handed to a thread (an onnxruntime call) cannot be interrupted; it
finishes in the background and its result is dropped. Health, readiness and metrics
are never timed out, so a busy service still answers its probes.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retrieval.serving.problems import problem_response

EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


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
