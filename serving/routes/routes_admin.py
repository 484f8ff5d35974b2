"""``POST /admin/reload`` (and SIGHUP): reopen the index from disk and swap it in atomically."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from retrieval.serving.api_models.schemas import ReloadResponse
from retrieval.serving.dependencies import API_KEY_ERRORS, Services, get_services, require_api_key
from retrieval.serving.http import api_examples
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import ReloadFailedError, RequestTimeoutError
from retrieval.serving.lifecycle import reload

router = APIRouter(tags=["admin"])


@router.post(
    "/admin/reload",
    response_model=ReloadResponse,
    dependencies=[Depends(require_api_key)],
    responses={
        **api_examples.example(api_examples.RELOAD),
        **problem_responses(ReloadFailedError, *API_KEY_ERRORS, RequestTimeoutError),
    },
    summary="Reload the index from disk (API key); the old one serves until the new one is ready",
)
async def reload_index(services: Services = Depends(get_services)) -> ReloadResponse:
    snapshot = await reload(services.state)
    return ReloadResponse(
        count=services.state.item_count, model_sha256=snapshot.embedder.model_sha256, generation=snapshot.generation
    )
