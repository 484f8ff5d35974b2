"""The service's lifecycle: the first index load, reloads on SIGHUP, and orderly shutdown.

The model and index load in the background after start-up, so ``/healthz`` answers at once and
``/readyz`` says 503 until the service can search. ``POST /admin/reload`` (routes_admin, through
``reload``) and SIGHUP both swap a freshly opened snapshot in atomically (``ServiceState.load``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from retrieval.indexing.common.errors import RetrievalError
from retrieval.serving.dependencies import Services
from retrieval.serving.http.service_errors import ReloadFailedError, RetryLaterError
from retrieval.serving.service_state import ServiceState, Snapshot

_log = logging.getLogger("retrieval.serving")


def lifespan(services: Services) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start the batcher, load the index in the background, reload on SIGHUP; undo it all on shutdown."""

    @asynccontextmanager
    async def run(_: FastAPI) -> AsyncIterator[None]:
        services.batcher.start()
        loading = asyncio.create_task(reload_quietly(services.state))
        install_sighup_reload(services.state)
        try:
            yield
        finally:
            remove_sighup_reload()
            loading.cancel()
            await services.batcher.stop()
            services.state.close()

    return run


async def reload(state: ServiceState) -> Snapshot:
    """Reload on request; a failure is a ReloadFailedError that says what keeps serving."""
    try:
        return await state.load()
    except RetryLaterError as error:  # a switch of the index directory raced the load: retry
        raise RetryLaterError(f"reload failed, {_serving(state)}: {error}", error.retry_after_s) from None
    except RetrievalError as error:
        raise ReloadFailedError(f"reload failed, {_serving(state)}: {error}") from None


def _serving(state: ServiceState) -> str:
    return f"generation {state.current().generation} keeps serving" if state.ready else "nothing is served"


async def reload_quietly(state: ServiceState) -> None:
    """Reload for SIGHUP and the first load: log failures instead of raising them."""
    try:
        await state.load()
    except Exception as error:  # noqa: BLE001 - a failed (re)load is reported by /readyz and the log
        _log.error("index load failed: %s", error)


def install_sighup_reload(state: ServiceState) -> bool:
    """Make SIGHUP reload the index; False where signals cannot be handled (not the main thread, Windows)."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(reload_quietly(state)))
    except (AttributeError, NotImplementedError, RuntimeError, ValueError):
        return False
    return True


def remove_sighup_reload() -> None:
    try:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
    except (AttributeError, NotImplementedError, RuntimeError, ValueError):
        pass
