"""FastAPI dependencies: the shared service objects of the app, and the API-key check for writes."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

import anyio
from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader

from retrieval.indexing.common.errors import IndexChangedError, IndexNotWritableError
from retrieval.serving.batcher import MicroBatcher
from retrieval.serving.http.admission import EmbedAdmission
from retrieval.serving.http.prometheus import ServiceMetrics
from retrieval.serving.http.service_errors import (
    ForbiddenError,
    InvalidParameterError,
    MissingApiKeyError,
    RequestTimeoutError,
    RetryLaterError,
)
from retrieval.serving.images.thumbnails import ThumbnailMaker
from retrieval.serving.service_state import ServiceState
from retrieval.serving.settings import ServeSettings

API_KEY_HEADER = "X-API-Key"
API_KEY_ERRORS = (MissingApiKeyError, ForbiddenError)
"""What ``require_api_key`` raises: no key sent (401), or a wrong key or writes disabled (403)."""
COMMON_CAUSES = (RetryLaterError, InvalidParameterError, RequestTimeoutError)
"""The problems any route may answer (the OpenAPI responses of every route list them)."""
WRITE_CAUSES = (IndexChangedError, IndexNotWritableError, *API_KEY_ERRORS, *COMMON_CAUSES)
"""The problems of a route that writes the index (behind the API key)."""
_api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, description="required for writes and reloads")


@dataclass(frozen=True)
class Services:
    """Everything a route needs, created once per app by ``create_app``."""

    settings: ServeSettings
    state: ServiceState
    batcher: MicroBatcher
    metrics: ServiceMetrics
    decode_limiter: anyio.CapacityLimiter  # uploads decoded at once (settings.max_concurrent_decodes)
    admission: EmbedAdmission  # images between admission and embedding (settings.max_queued_images)
    thumbnails: ThumbnailMaker  # previews, decoded in the same slots and budget


async def get_services(request: Request) -> Services:
    """The app's services (``async``, as every dependency here: FastAPI runs a plain ``def`` dependency in a
    worker thread, a thread hop on every request for an attribute read)."""
    return request.app.state.services


async def require_api_key(
    services: Services = Depends(get_services), given: str | None = Security(_api_key_header)
) -> None:
    """401 without a key, 403 with a wrong one; writes are refused when the server has no key."""
    expected = services.settings.api_key
    if expected is None:
        raise ForbiddenError(
            "writes are disabled: start the server with --api-key (or RETRIEVAL_API_KEY) to enable them."
        )
    if not given:
        raise MissingApiKeyError(
            f"this endpoint needs an API key; send it in the {API_KEY_HEADER} header.", API_KEY_HEADER
        )
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise ForbiddenError(f"the API key in the {API_KEY_HEADER} header is wrong.")
