"""One path and method, two content types: ``POST /items`` and ``POST /search`` take a multipart form (images)
or a JSON body (vectors). Starlette routes by path and method only, so ``JsonBodyRoute`` matches a request
only when its Content-Type is JSON (``application/json`` or ``application/*+json``): registered before the
multipart route of the same path, it takes the JSON requests and leaves every other one to that route.

``json_body`` parses the body with pydantic's own JSON parser (``model_validate_json``: a 1,000-vector batch
parses several times faster than ``json.loads`` then validation), and a body that does not fit its model is
the same 422 problem as any other invalid field. That parser keeps the last of a key named twice (``{"dry_run":
true, "dry_run": false}`` deleted), so ``repeated_key`` first reads its braces and strings and refuses a
key named twice in one object at any depth (a 422 naming it, as a form field sent twice is). The request models are strict
(``schemas._Strict``): ``true``/``false`` only for a boolean, a JSON number for a number.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import anyio
import numpy as np
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


def repeated_key(body: bytes) -> str | None:
    """The first key that some object of the JSON ``body`` names twice, at any depth, or None (also for text
    that is not JSON: the model's parser then says what is wrong with it). Only the braces and the strings
    are visited (found by NumPy, numbers skipped): a 10 MB batch of vectors takes about a tenth of its
    validation, where ``json.loads`` with a hook took three times it."""
    data = np.frombuffer(body, np.uint8)
    marks = np.flatnonzero((data == _OPEN) | (data == _CLOSE) | (data == _QUOTE)).tolist()
    objects: list[set[str]] = []  # the keys of each object open at this point, innermost last
    at, count = 0, len(marks)
    while at < count:
        start, at = marks[at], at + 1
        if body[start] == _OPEN:
            if len(objects) == MAX_DEPTH:
                return None
            objects.append(set())
        elif body[start] == _CLOSE:
            if objects:
                objects.pop()
        else:  # a string: on to its closing quote, then a key if a colon follows
            while at < count and (body[marks[at]] != _QUOTE or _escaped(body, marks[at])):
                at += 1
            if at == count:
                return None
            end, at = marks[at] + 1, at + 1
            if objects and _COLON.match(body, end) is not None:
                try:
                    key = json.loads(body[start:end])
                except ValueError:
                    return None
                if key in objects[-1]:
                    return str(key)
                objects[-1].add(key)
    return None


MAX_DEPTH = 256
"""Objects open at once past which ``repeated_key`` stops looking: pydantic's parser refuses such nesting."""
_OPEN, _CLOSE, _QUOTE, _BACKSLASH = b'{}"\\'
_COLON = re.compile(rb"[ \t\r\n]*:")


def _escaped(body: bytes, quote: int) -> bool:
    """Whether the quote at ``quote`` is escaped: an odd number of backslashes before it."""
    back = 0
    while quote - back > 0 and body[quote - back - 1] == _BACKSLASH:
        back += 1
    return back % 2 == 1


def _located(entry: Any) -> dict[str, Any]:
    """A pydantic error located in the JSON body (``field 'items.0.vector'``), its input left out (a vector
    of a thousand numbers is no help in an error)."""
    return {"loc": ("json", *entry.get("loc", ())), "msg": entry.get("msg", "is invalid"), "type": entry.get("type")}
