"""Backpressure for the decode -> embed path: a bound on the images admitted to it at once.

Each image of ``/search``, ``/embed`` and ``POST /items`` is admitted before it is decoded and leaves
when its embedding is back (or its request fails). Past ``max_queued_images`` a request is refused at
once with ``RetryLaterError`` (503 and Retry-After) instead of queueing: under overload the accepted
requests keep a latency of about ``max_queued_images`` / throughput, memory stays bounded, and clients
learn to back off instead of timing out (``bench/bench_serving_load.py --overload``). ``AdmissionGate``
refuses such requests before their body is read, so refusing costs the accepted requests little CPU;
``EmbedAdmission.admit`` is the exact check (the gate may let a request through just before the bound
is reached).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from starlette.types import ASGIApp, Receive, Scope, Send

from retrieval.serving.http.problems import problem_response, sentence, status_for
from retrieval.serving.http.service_errors import RetryLaterError

RETRY_AFTER_S = 1
EMBEDDING_ROUTES = frozenset({"/search", "/embed", "/items"})  # the POSTs that upload images


class EmbedAdmission:
    """Counts the images between admission and their embedding (event-loop thread only)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0

    @property
    def full(self) -> bool:
        return self.pending >= self.limit

    def refusal(self) -> RetryLaterError:
        return RetryLaterError(
            f"the service is at capacity ({self.pending} images are being decoded or embedded, the limit "
            "max_queued_images); retry in a moment",
            retry_after_s=RETRY_AFTER_S,
        )

    @contextmanager
    def admit(self, images: int = 1) -> Iterator[None]:
        """Hold ``images`` of ``limit`` places for the block; RetryLaterError when too few are free. A batch
        larger than ``limit`` needs all of them free (and then holds them all)."""
        places = min(images, self.limit)
        if self.pending + places > self.limit:
            raise self.refusal()
        self.pending += places
        try:
            yield
        finally:
            self.pending -= places


class AdmissionGate:
    """ASGI middleware: an upload that arrives while the bound is reached is refused before its body is read."""

    def __init__(self, app: ASGIApp, admission: EmbedAdmission) -> None:
        self.app = app
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope.get("method") == "POST"
            and scope.get("path") in EMBEDDING_ROUTES
            and self.admission.full
        ):
            refusal = self.admission.refusal()
            headers = {"Retry-After": str(refusal.retry_after_s)}
            await problem_response(status_for(RetryLaterError), sentence(refusal), headers=headers)(
                scope, receive, send
            )
            return
        await self.app(scope, receive, send)
