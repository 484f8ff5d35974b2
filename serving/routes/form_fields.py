"""The one vocabulary of upload fields: one name per item field, repeated once per item (``image``,
``label``, ``key``; ``metadata`` a JSON object or array), the same on ``POST /search``, ``POST /items``
and ``PUT /items/by-key/{key}``.

``POST /items`` took ``images`` and ``labels`` before; for one release those names still work, and the
response then carries ``Deprecation: @1795737600`` (RFC 9745: deprecated since 2026-11-27), a ``Link`` to
the service's API page of the operation (rel="deprecation") and a ``Warning`` naming the new field (299, RFC 7234's miscellaneous
persistent warning).
"""

from __future__ import annotations

from typing import TypeVar

from fastapi import Response

from retrieval.serving.http.service_errors import InvalidParameterError

T = TypeVar("T")
DEPRECATED_SINCE = "@1795737600"
"""When the old field names were deprecated (2026-11-27T00:00:00Z), as RFC 9745's Deprecation value."""
DEPRECATION_DOCS = "/docs#/items/add_items_items_post"
"""Where the deprecation's Link points: the service's own API page of ``POST /items`` (the new names, the
old ones marked deprecated); docs/serving.md, "Upload fields", says the same."""


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
    response.headers["Deprecation"] = DEPRECATED_SINCE
    response.headers["Link"] = f'<{DEPRECATION_DOCS}>; rel="deprecation"'
    response.headers["Warning"] = f"{previous}, {text}" if previous else text
