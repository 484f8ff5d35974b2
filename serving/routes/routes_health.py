"""``GET /healthz`` (the process answers), ``GET /readyz`` (model and index loaded), ``GET /metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from retrieval.indexing.exported_model.no_model import has_model
from retrieval.serving.api_models.schemas import HealthResponse, ReadyResponse
from retrieval.serving.dependencies import Services, get_services
from retrieval.serving.http import api_examples
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import RetryLaterError

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=HealthResponse,
    responses=api_examples.example(api_examples.HEALTH),
    summary="Liveness: the process answers",
)
async def healthz() -> HealthResponse:
    return HealthResponse()


@router.get(
    "/readyz",
    response_model=ReadyResponse,
    responses={**api_examples.example(api_examples.READY), **problem_responses(RetryLaterError)},
    summary="Readiness: 503 until the model and the index are loaded",
)
async def readyz(services: Services = Depends(get_services)) -> ReadyResponse:
    snapshot = services.state.current()
    return ReadyResponse(
        count=services.state.item_count,
        model_sha256=snapshot.embedder.model_sha256,
        embedding_dim=snapshot.embedder.dim,
        k_max=services.settings.k_max,
        has_model=has_model(snapshot.embedder.manifest),
        has_text=snapshot.text is not None,
    )


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics (text format)",
    responses=api_examples.example(api_examples.METRICS, media_type="text/plain"),
)
async def metrics(services: Services = Depends(get_services)) -> Response:
    body, content_type = services.metrics.render()
    return Response(body, media_type=content_type)
