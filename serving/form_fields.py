"""The one vocabulary of upload fields: one name per item field, repeated once per item (``image``,
``label``, ``key``; ``metadata`` a JSON object or array), the same on ``POST /search``, ``POST /items``
and ``PUT /items/by-key/{key}``.

``POST /items`` took ``images`` and ``labels`` before; for one release those names still work, and the
response then carries ``Deprecation: true``, a ``Link`` to the docs (rel="deprecation") and a ``Warning``
naming the new field (RFC 9745, RFC 8288, RFC 9111's 299 warning).
"""

from __future__ import annotations

from typing import TypeVar

from fastapi import Response

from retrieval.serving.service_errors import InvalidParameterError

T = TypeVar("T")
DEPRECATION_DOCS = "/docs/serving.md#upload-fields"
"""Where the deprecation's Link points: docs/serving.md, "Upload fields"."""


def renamed_field(
    current: list[T] | None, old: list[T] | None, name: str, old_name: str, response: Response
) -> list[T]:
    """The values sent under the field's name, or under its deprecated name (marking ``response`` so);
    a 422 when both are sent or, for a required field, neither."""
    if current and old:
        raise InvalidParameterError(f"send the form field '{name}' only (its old name '{old_name}' as well was sent).")
    if old:
        mark_deprecated(response, f"form field '{old_name}' is deprecated; send one '{name}' field per item")
        return old
    return current or []


def mark_deprecated(response: Response, warning: str) -> None:
    previous = response.headers.get("warning")
    text = f'299 - "{warning}"'
    response.headers["Deprecation"] = "true"
    response.headers["Link"] = f'<{DEPRECATION_DOCS}>; rel="deprecation"'
    response.headers["Warning"] = f"{previous}, {text}" if previous else text
