"""One path and method, two content types: ``POST /items`` and ``POST /search`` take a multipart form (images)
or a JSON body (vectors). Starlette routes by path and method only, so ``JsonBodyRoute`` matches a request
only when its Content-Type is JSON (``application/json`` or ``application/*+json``): registered before the
multipart route of the same path, it takes the JSON requests and leaves every other one to that route.

``json_body`` parses the body with pydantic's own JSON parser (``model_validate_json``: a 1,000-vector batch
parses several times faster than ``json.loads`` then validation), and a body that does not fit its model is
the same 422 problem as any other invalid field. That parser keeps the last of a key named twice (``{"dry_run":
true, "dry_run": false}`` deleted), so the body is first read by ``json.loads`` with a hook that refuses a
repeated key at any depth (a 422 naming it, as a form field sent twice is). The request models are strict
(``schemas._Strict``): ``true``/``false`` only for a boolean, a JSON number for a number.
"""

from __future__ import annotations

from typing import Any, TypeVar

import json

import anyio
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.routing import Match
from starlette.types import Scope

from retrieval.serving.http.json_bodies import is_json
from retrieval.serving.http.service_errors import InvalidParameterError

ModelT = TypeVar("ModelT", bound=BaseModel)
INLINE_BODY_BYTES = 64 * 1024
"""A body up to this size is parsed on the event loop (a one-vector search, about 11 kB at 512-d, parses in
tens of microseconds, less than a hop to a worker thread and back costs); a larger one in a worker thread."""


class JsonBodyRoute(APIRoute):
    """An ``APIRoute`` that matches JSON requests only (any other request goes on to the next route)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE and not is_json(scope):
            return Match.NONE, {}
        return match, child


async def json_body(request: Request, model: type[ModelT]) -> ModelT:
    """The request's JSON body as ``model``; malformed JSON or a field that does not fit is a 422."""
    body = await request.body()
    if len(body) <= INLINE_BODY_BYTES:  # a large batch in a worker thread: it does not hold up the event loop
        return _parsed(body, model)
    return await anyio.to_thread.run_sync(_parsed, body, model)


def _parsed(body: bytes, model: type[ModelT]) -> ModelT:
    if (key := repeated_key(body)) is not None:
        raise InvalidParameterError(f'the JSON body names the key "{key}" twice in one object; send each key once.')
    try:
        return model.model_validate_json(body)
    except ValidationError as error:
        raise RequestValidationError([_located(entry) for entry in error.errors(include_url=False)]) from None


class _RepeatedKeyError(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _RepeatedKeyError(key)
        seen.add(key)


def repeated_key(body: bytes) -> str | None:
    """The first key that some object of the JSON ``body`` names twice, at any depth, or None (also for text
    that is not JSON: the model's parser says what is wrong with it)."""
    try:
        json.loads(body, object_pairs_hook=_unique_pairs)
    except _RepeatedKeyError as error:
        return error.key
    except (ValueError, RecursionError):
        return None
    return None


def _located(entry: Any) -> dict[str, Any]:
    """A pydantic error located in the JSON body (``field 'items.0.vector'``), its input left out (a vector
    of a thousand numbers is no help in an error)."""
    return {"loc": ("json", *entry.get("loc", ())), "msg": entry.get("msg", "is invalid"), "type": entry.get("type")}
