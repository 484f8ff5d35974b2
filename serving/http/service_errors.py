"""The service's own failures, raised by its routes, lifecycle and state, answered in ``problems.ERROR_STATUSES``.

They are ``RetrievalError``s like the index's errors, so the modules below the handlers raise
meanings, not HTTP statuses; ``problems`` alone turns them into problem bodies with a status.
``DataError`` (from the index and the decoder) means bad client data; ``invalid_parameters`` is the
one place where it becomes a bad request parameter instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from retrieval.indexing.common.errors import DataError, RetrievalError


class RetryLaterError(RetrievalError):
    """The service cannot answer now but will shortly (still loading, or reloaded mid-request)."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RateLimitedError(RetrievalError):
    """A client sent more requests than its token bucket allows (``rate_limit.RateLimit``)."""


class ReloadFailedError(RetrievalError):
    """A reload could not open the index or model on disk; the previous snapshot, if any, keeps serving."""


class RequestTimeoutError(RetrievalError):
    """The request took longer than the service's limit (``middleware.RequestTimeout``)."""


class MissingApiKeyError(RetrievalError):
    """A write or reload came without an API key; ``header`` names the header to send it in."""

    def __init__(self, message: str, header: str) -> None:
        super().__init__(message)
        self.header = header


class ForbiddenError(RetrievalError):
    """A wrong API key, or writes disabled because the server has none."""


class PayloadTooLargeError(DataError):
    """A request body, a file or a number of files above the configured limits."""


class UnsupportedMediaTypeError(DataError):
    """An upload declared as something other than an image."""


class InvalidParameterError(DataError):
    """A query parameter or form field out of range or malformed (k, rerank, filter, labels, metadata)."""


@contextmanager
def invalid_parameters(field: str | None = None) -> Iterator[None]:
    """A ``DataError`` raised inside (parsing a filter or metadata field) is an ``InvalidParameterError``,
    its sentence after "``field``: " when a field is named."""
    try:
        yield
    except InvalidParameterError:
        raise
    except DataError as error:
        raise InvalidParameterError(f"{field}: {error}." if field else str(error)) from None
