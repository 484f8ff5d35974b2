"""Micro-batching: images of concurrent requests are embedded together in one onnxruntime call.

A request decodes and preprocesses its image in its own thread, then awaits
``embed(embedder, pixels)`` (or ``embed_many`` for the images of a batch search, which stay together in
one call); a single background task takes the first waiting request, gathers more until their images
reach ``max_batch_size`` or ``max_wait_ms`` is reached, and runs the batch in a worker thread so the
event loop keeps serving. One batch runs at a
time: onnxruntime already uses every core inside a call, so parallel calls would only
fight over them. Images are grouped by embedder, so a reload that swaps the model never
mixes two models in one call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    def embed_arrays(self, batch: np.ndarray) -> np.ndarray: ...


@dataclass
class _Job:
    """One request's images, (n, 3, h, w): never split across calls (a job above ``max_batch_size`` runs
    alone)."""

    embedder: Embedder
    pixels: np.ndarray
    future: asyncio.Future = field(repr=False)


class MicroBatcher:
    """Gathers images into batches of at most ``max_batch_size``, waiting at most ``max_wait_ms``."""

    def __init__(self, max_batch_size: int, max_wait_ms: float, on_batch: Callable[[int], None] | None = None):
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_ms / 1000.0
        self._on_batch = on_batch or (lambda size: None)
        self._queue: asyncio.Queue[_Job] | None = None
        self._held: _Job | None = None  # taken from the queue, did not fit the last batch: first of the next
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Start the batching task on the running event loop."""
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="micro-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        waiting = [self._held] if self._held is not None else []
        self._held = None
        while self._queue is not None and not self._queue.empty():
            waiting.append(self._queue.get_nowait())
        for job in waiting:
            if not job.future.done():
                job.future.set_exception(RuntimeError("the service is shutting down"))

    async def embed(self, embedder: Embedder, pixels: np.ndarray) -> np.ndarray:
        """Embed one preprocessed (3, h, w) image with whatever else is waiting; returns its (d,) vector."""
        return (await self.embed_many(embedder, pixels[None]))[0]

    async def embed_many(self, embedder: Embedder, pixels: np.ndarray) -> np.ndarray:
        """Embed preprocessed (n, 3, h, w) images in one model call (with whatever else is waiting and
        fits); returns their (n, d) vectors."""
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Job(embedder, pixels, future))
        return await future

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            jobs = await self._gather(self._queue)
            for group in _group_by_embedder(jobs):
                await self._embed_group(group)

    async def _gather(self, queue: asyncio.Queue[_Job]) -> list[_Job]:
        held, self._held = self._held, None
        jobs = [held if held is not None else await queue.get()]
        images = len(jobs[0].pixels)
        deadline = time.monotonic() + self.max_wait_s
        while images < self.max_batch_size:
            job = await self._next(queue, deadline)
            if job is None:
                break
            if images + len(job.pixels) > self.max_batch_size:
                self._held = job  # a batch search's images stay together: it opens the next call
                break
            jobs.append(job)
            images += len(job.pixels)
        return [job for job in jobs if not job.future.done()]  # drop requests that timed out meanwhile

    @staticmethod
    async def _next(queue: asyncio.Queue[_Job], deadline: float) -> _Job | None:
        """The next waiting job, waiting at most until ``deadline``; None when none came."""
        try:
            return queue.get_nowait()
        except asyncio.QueueEmpty:
            pass
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            return await asyncio.wait_for(queue.get(), remaining)
        except asyncio.TimeoutError:
            return None

    async def _embed_group(self, jobs: list[_Job]) -> None:
        if not jobs:
            return
        sizes = [len(job.pixels) for job in jobs]
        self._on_batch(sum(sizes))
        try:
            vectors = await asyncio.to_thread(_embed_stacked, jobs[0].embedder, [job.pixels for job in jobs])
        except Exception as error:  # every waiting request gets the failure, the loop keeps running
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(error)
            return
        ends = np.cumsum(sizes)
        for job, end, size in zip(jobs, ends, sizes):
            if not job.future.done():
                job.future.set_result(vectors[end - size : end])


def _group_by_embedder(jobs: list[_Job]) -> list[list[_Job]]:
    groups: dict[int, list[_Job]] = {}
    for job in jobs:
        groups.setdefault(id(job.embedder), []).append(job)
    return list(groups.values())


def _embed_stacked(embedder: Embedder, pixels: list[np.ndarray]) -> np.ndarray:
    return embedder.embed_arrays(np.concatenate(pixels))
