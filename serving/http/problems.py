"""JSON problem bodies (RFC 9457: ``{type, title, status, detail}``) for every error the service returns.

Every exception path ends here, so a client always gets ``application/problem+json``
with a sentence it can act on, and bad client input never surfaces as a 500.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from retrieval.indexing.common.errors import (
    DataError,
    IndexBusyError,
    IndexChangedError,
    IndexNotWritableError,
    ItemNotFoundError,
    KeyConflictError,
    ModelMismatchError,
    RetrievalError,
)
from retrieval.indexing.duplicates.copy_thresholds import NoCopyThresholdError
from retrieval.serving.api_models.schemas import Problem
from retrieval.serving.http.service_errors import (
    ForbiddenError,
    InvalidParameterError,
    MissingApiKeyError,
    PayloadTooLargeError,
    RateLimitedError,
    ReloadFailedError,
    RequestTimeoutError,
    RetryLaterError,
    UnsupportedMediaTypeError,
)

PROBLEM_MEDIA_TYPE = "application/problem+json"
_log = logging.getLogger("retrieval.serving")


def problem_response(
    status: int, detail: str, *, title: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = Problem(
        type=_type_uri(status),
        title=title or HTTPStatus(status).phrase,
        status=status,
        detail=detail,
    )
    return JSONResponse(body.model_dump(), status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


ProblemCause = type[RetrievalError]
"""What can make a route fail: an error type (its status comes from ``ERROR_STATUSES``)."""


def problem_responses(*causes: ProblemCause) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries for the problem bodies a route can return, each with an example.

    Error types are mapped through ``ERROR_STATUSES``, the table the handlers answer with, so the
    documented statuses and the real ones come from one place. ``openapi.install_openapi`` moves the
    ``Problem`` schema under ``application/problem+json``, the media type these responses carry."""
    statuses = sorted({status_for(cause) for cause in causes})
    return {
        status: {
            "model": Problem,
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_MEDIA_TYPE: {"example": _example_problem(status)}},
        }
        for status in statuses
    }


_EXAMPLE_DETAILS = {
    400: "cannot read image 'query.jpg': not a recognised image format.",
    401: "this endpoint needs an API key; send it in the X-API-Key header.",
    403: "the API key in the X-API-Key header is wrong.",
    404: "there is no item 42 in the index.",
    409: "the service switched to another model while the images were being embedded; send them again.",
    413: "the request body is larger than the limit of 10551296 bytes; send a smaller image.",
    415: "file 'notes.txt' was sent as 'text/plain'; upload a JPEG, PNG, WebP, GIF, BMP or TIFF image.",
    422: "k must be between 1 and 100, got 0.",
    429: "this client sent more than 20 requests at once or 5 per second on average; retry after the Retry-After seconds.",
    503: "The service is not ready: the model and index are still loading; retry in a moment.",
    504: "the request took longer than the limit of 30 s; retry, or send a smaller image.",
}


def _example_problem(status: int) -> dict[str, Any]:
    detail = _EXAMPLE_DETAILS.get(status, HTTPStatus(status).phrase)
    return Problem(type=_type_uri(status), title=HTTPStatus(status).phrase, status=status, detail=detail).model_dump()


def _type_uri(status: int) -> str:
    return f"https://httpstatuses.io/{status}"


def validation_detail(error: RequestValidationError) -> str:
    """One sentence naming the first invalid field, e.g. ``query parameter 'k': ...``."""
    first = error.errors()[0]
    loc = [str(part) for part in first.get("loc", ())]
    where = {"query": "query parameter", "body": "form field", "path": "path parameter", "header": "header"}
    kind = where.get(loc[0], "field") if loc else "field"
    name = ".".join(loc[1:]) or "request"
    return f"{kind} '{name}': {first.get('msg', 'is invalid')}."


async def _on_validation(_: Request, error: RequestValidationError) -> JSONResponse:
    return problem_response(status_for(InvalidParameterError), validation_detail(error))


async def _on_http(_: Request, error: StarletteHTTPException) -> JSONResponse:
    detail = error.detail if isinstance(error.detail, str) else HTTPStatus(error.status_code).phrase
    return problem_response(error.status_code, detail, headers=getattr(error, "headers", None))


# The one mapping from the product's and the service's errors to HTTP statuses, most specific first.
# DataError comes from the client's bytes, ids or parameters; other RetrievalErrors mean the index on
# disk (or the service) cannot answer now.
ERROR_STATUSES: tuple[tuple[type[RetrievalError], int], ...] = (
    (MissingApiKeyError, 401),
    (ForbiddenError, 403),
    (ItemNotFoundError, 404),
    (IndexChangedError, 409),
    (KeyConflictError, 409),
    (ModelMismatchError, 409),
    (NoCopyThresholdError, 409),
    (PayloadTooLargeError, 413),
    (UnsupportedMediaTypeError, 415),
    (InvalidParameterError, 422),
    (RateLimitedError, 429),
    (IndexNotWritableError, 503),
    (RetryLaterError, 503),
    (ReloadFailedError, 503),
    (RequestTimeoutError, 504),
    (DataError, 400),
    (RetrievalError, 503),
)


def status_for(kind: type[RetrievalError]) -> int:
    """The HTTP status an error of type ``kind`` is answered with."""
    return next(status for handled, status in ERROR_STATUSES if issubclass(kind, handled))


def status_of(error: RetrievalError) -> int:
    return status_for(type(error))


def sentence(error: RetrievalError) -> str:
    """The error's message as the problem's ``detail``: one sentence, ending with a full stop."""
    text = str(error)
    return text if text.endswith(".") else f"{text}."


BUSY_RETRY_AFTER_S = 1
"""When to retry a write that found another writer holding the index (``IndexBusyError``)."""


def _headers(error: RetrievalError) -> dict[str, str] | None:
    if isinstance(error, RetryLaterError):
        return {"Retry-After": str(error.retry_after_s)}
    if isinstance(error, IndexBusyError):
        return {"Retry-After": str(BUSY_RETRY_AFTER_S)}
    if isinstance(error, MissingApiKeyError):
        return {"WWW-Authenticate": error.header}
    return None


async def _on_retrieval(_: Request, error: RetrievalError) -> JSONResponse:
    return problem_response(status_of(error), sentence(error), headers=_headers(error))


def unexpected_problem(error: Exception) -> JSONResponse:
    """Log an error no handler answers and make its 500 problem (``middleware.UnexpectedErrors`` sends it)."""
    _log.exception("unhandled error", exc_info=error)
    return problem_response(500, "The server hit an unexpected error; it has been logged.")


async def _on_unexpected(_: Request, error: Exception) -> JSONResponse:
    """The last resort, for an error raised outside ``middleware.UnexpectedErrors`` (Starlette answers it,
    then closes the connection)."""
    return unexpected_problem(error)


def install_problem_handlers(app: FastAPI) -> None:
    # Starlette types handlers as taking any Exception; each of these is registered for its own type.
    app.add_exception_handler(RequestValidationError, _on_validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _on_http)  # type: ignore[arg-type]
    app.add_exception_handler(RetrievalError, _on_retrieval)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _on_unexpected)
