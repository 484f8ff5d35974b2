"""What a browser on an allowed origin may send (``RETRIEVAL_CORS_ORIGINS``), read off the app's routes
rather than kept as a second list: every method a route answers and every request header a route or one
of its dependencies declares (``X-API-Key``, ``Idempotency-Key``, ...). A hand list forgot ``PUT`` and
``Idempotency-Key`` when upserts and idempotent adds came, so browsers could use neither."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from fastapi.dependencies.models import Dependant
from fastapi.openapi.models import APIKeyIn
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute


def cors_methods(routes: Iterable[BaseRoute]) -> list[str]:
    """Every method of the API's routes, sorted."""
    return sorted({method for route in routes if isinstance(route, APIRoute) for method in route.methods or ()})


def cors_headers(routes: Iterable[BaseRoute]) -> list[str]:
    """Every request header the API's routes read (declared ``Header`` parameters and API-key schemes,
    dependencies included), sorted; the CORS-safelisted ones (``Content-Type``, ...) are always allowed."""
    dependants = (route.dependant for route in routes if isinstance(route, APIRoute))
    return sorted({name for dependant in dependants for name in _headers(dependant)}, key=str.lower)


def _headers(dependant: Dependant) -> Iterator[str]:
    for param in dependant.header_params:
        yield param.alias
    model = getattr(dependant.call, "model", None)  # a security scheme such as APIKeyHeader
    if getattr(model, "in_", None) == APIKeyIn.header:
        yield model.name  # type: ignore[union-attr]
    for inner in dependant.dependencies:
        yield from _headers(inner)
