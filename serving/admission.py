"""Backpressure for the decode -> embed path: a bound on the images admitted to it at once.

Each image of ``/search``, ``/embed`` and ``POST /items`` is admitted before it is decoded and leaves
when its embedding is back (or its request fails). Past ``max_queued_images`` a request is refused at
once with ``RetryLaterError`` (503 and Retry-After) instead of queueing: under overload the accepted
requests keep a latency of about ``max_queued_images`` / throughput, memory stays bounded, and clients
learn to back off instead of timing out (``bench/bench_serving_load.py --overload``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from retrieval.serving.service_errors import RetryLaterError

RETRY_AFTER_S = 1


class EmbedAdmission:
    """Counts the images between admission and their embedding (event-loop thread only)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Hold one of ``limit`` places for the block; RetryLaterError when none is free."""
        if self.pending >= self.limit:
            raise RetryLaterError(
                f"the service is at capacity ({self.pending} images are being decoded or embedded, the limit "
                "max_queued_images); retry in a moment",
                retry_after_s=RETRY_AFTER_S,
            )
        self.pending += 1
        try:
            yield
        finally:
            self.pending -= 1
