"""The FastAPI app factory: routes, middleware, problem handlers; the lifecycle is in ``lifecycle``.

The model and index load in the background after start-up, so ``/healthz`` answers at
once and ``/readyz`` says 503 until the service can search. ``app_from_env`` is the
factory uvicorn imports in each worker process when ``--workers`` is above one.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from retrieval.serving.batcher import MicroBatcher
from retrieval.serving.dependencies import Services
from retrieval.serving.glibc_malloc import limit_malloc_arenas
from retrieval.serving.http.admission import AdmissionGate, EmbedAdmission
from retrieval.serving.http.cors_policy import cors_headers, cors_methods
from retrieval.serving.http.json_bodies import install_json_bodies
from retrieval.serving.http.middleware import (
    AllowedMethods,
    BodySizeLimit,
    MetricsMiddleware,
    RequestTimeout,
    UnexpectedErrors,
)
from retrieval.serving.http.openapi import install_openapi
from retrieval.serving.http.problems import install_problem_handlers
from retrieval.serving.http.prometheus import ServiceMetrics
from retrieval.serving.http.rate_limit import RateLimit
from retrieval.serving.http.url_text import Utf8Url
from retrieval.serving.images.thumbnails import ThumbnailMaker
from retrieval.serving.images.uploads import MULTIPART_SLACK_BYTES
from retrieval.serving.lifecycle import lifespan
from retrieval.serving.routes import (
    routes_admin,
    routes_audit,
    routes_browse,
    routes_duplicates,
    routes_health,
    routes_items,
    routes_keys,
    routes_search,
    routes_vectors,
)
from retrieval.serving.service_state import ServiceState, Snapshot
from retrieval.serving.settings import ServeSettings, settings_from_env

STATIC_DIR = Path(__file__).resolve().parent / "static"
ROUTERS = (
    routes_vectors.json_router,  # first: JSON bodies of POST /items and /search; any other body goes on
    routes_vectors.router,  # before routes_keys: /items/by-key/{key}/similar is not a key ending in /similar
    routes_keys.router,  # first: /items/by-key/... is not /items/{id}/similar or /items/{id}/thumbnail
    routes_search.router,
    routes_items.router,
    routes_browse.router,
    routes_duplicates.router,
    routes_audit.router,
    routes_admin.router,
    routes_health.router,
)


def create_app(settings: ServeSettings) -> FastAPI:
    """A ready-to-run app for ``settings``; nothing is loaded until the app starts."""
    if settings.malloc_arenas is not None:
        limit_malloc_arenas(settings.malloc_arenas)
    services = _make_services(settings)
    # /docs and /redoc load Swagger UI and ReDoc from files in the fastapi-offline wheel, not a CDN.
    app = FastAPIOffline(
        title="retrieval search service",
        summary="Find similar images with a deep-metric-learning embedder and faiss (float or binary codes).",
        version="0.1.0",
        lifespan=lifespan(services),
    )
    app.state.services = services
    install_problem_handlers(app)
    install_openapi(app, settings.k_max)
    install_json_bodies(app, routes_vectors.JSON_BODIES, routes_vectors.BODY_MODELS)
    for router in ROUTERS:
        app.include_router(router)
    _add_page(app)
    _add_middleware(app, services)
    return app


def app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory retrieval.serving.app:app_from_env`` (settings from RETRIEVAL_*)."""
    return create_app(settings_from_env())


def _make_services(settings: ServeSettings) -> Services:
    metrics = ServiceMetrics()

    def on_change(snapshot: Snapshot, count: int) -> None:
        metrics.index_items.set(count)
        metrics.index_generation.set(snapshot.generation)

    batcher = MicroBatcher(settings.batch_max_size, settings.batch_max_wait_ms, on_batch=metrics.batch_size.observe)
    decodes = anyio.CapacityLimiter(settings.max_concurrent_decodes)
    thumbnails = ThumbnailMaker(
        settings.thumbnail_px,
        max_pixels=settings.max_pixels,
        max_decode_bytes=settings.max_decode_mb << 20,
        decode_slots=decodes,
        shows_paths=settings.shows_paths,
    )
    state = ServiceState(settings, on_change)
    return Services(
        settings=settings,
        state=state,
        batcher=batcher,
        metrics=metrics,
        decode_limiter=decodes,
        admission=EmbedAdmission(settings.max_queued_images),
        thumbnails=thumbnails,
    )


def _add_page(app: FastAPI) -> None:
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})


def _add_middleware(app: FastAPI, services: Services) -> None:
    """Outermost last: metrics see every response, including 413s, 429s, 500s and 504s made by the others; CORS
    answers preflights before ``AllowedMethods`` answers other ``OPTIONS`` requests."""
    settings = services.settings
    routes = [*app.routes, *(route for router in ROUTERS for route in router.routes)]
    app.add_middleware(AllowedMethods, routes=routes)
    app.add_middleware(RequestTimeout, timeout_s=settings.request_timeout_s)
    body_limit = settings.max_upload_bytes + MULTIPART_SLACK_BYTES
    app.add_middleware(BodySizeLimit, max_bytes=body_limit, json_max_bytes=settings.max_json_bytes)
    app.add_middleware(AdmissionGate, admission=services.admission)
    app.add_middleware(Utf8Url)
    if settings.rate_limit_per_s is not None:
        app.add_middleware(RateLimit, rate=settings.rate_limit_per_s, burst=settings.rate_limit_burst)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=cors_methods(routes),
            allow_headers=cors_headers(routes),
        )
    app.add_middleware(UnexpectedErrors)  # around every other one: any error they raise is a 500 problem
    app.add_middleware(MetricsMiddleware, metrics=services.metrics)
