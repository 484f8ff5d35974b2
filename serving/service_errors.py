"""The service's own failures, raised by its lifecycle and state, answered in ``problems.ERROR_STATUSES``.

They are ``RetrievalError``s like the index's errors, so the modules below the routes raise
meanings, not HTTP statuses; ``problems`` alone turns them into 503 problem bodies.
"""

from __future__ import annotations

from retrieval.indexing.common.errors import RetrievalError


class RetryLaterError(RetrievalError):
    """The service cannot answer now but will shortly (still loading, or reloaded mid-request)."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ReloadFailedError(RetrievalError):
    """A reload could not open the index or model on disk; the previous snapshot, if any, keeps serving."""
