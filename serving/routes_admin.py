"""``POST /admin/reload`` (and SIGHUP): reopen the index from disk and swap it in atomically."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends

from retrieval.indexing.common.errors import RetrievalError
from retrieval.serving.dependencies import Services, get_services, require_api_key
from retrieval.serving.problems import ProblemError, problem_responses
from retrieval.serving.schemas import ReloadResponse

router = APIRouter(tags=["admin"])
_log = logging.getLogger("retrieval.serving")


@router.post(
    "/admin/reload",
    response_model=ReloadResponse,
    dependencies=[Depends(require_api_key)],
    responses=problem_responses(401, 403, 503),
    summary="Reload the index from disk (API key); the old one serves until the new one is ready",
)
async def reload_index(services: Services = Depends(get_services)) -> ReloadResponse:
    state = services.state
    try:
        snapshot = await state.load()
    except RetrievalError as error:
        serving = f"generation {state.current().generation} keeps serving" if state.ready else "nothing is served"
        raise ProblemError(503, f"reload failed, {serving}: {error}") from None
    return ReloadResponse(
        count=state.item_count, model_sha256=snapshot.embedder.model_sha256, generation=snapshot.generation
    )
