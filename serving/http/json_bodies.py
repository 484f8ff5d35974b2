"""JSON request bodies in the OpenAPI document beside the multipart ones: ``POST /items`` and ``POST
/search`` take either (``routes_vectors``' JSON routes are left out of the document, since a path and
method is one operation there), so each ``JsonBody`` adds its ``application/json`` content, with its
schema and examples, to the operation of the same path and method; the models' schemas join the
components."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.types import Scope

JSON_MEDIA_TYPE = "application/json"
_REF = "#/components/schemas/{model}"


@dataclass(frozen=True)
class JsonBody:
    """The JSON body ``model`` of the operation ``method path``, its named examples and a sentence added to
    the operation's description."""

    path: str
    method: str
    model: type[BaseModel]
    examples: dict[str, dict[str, Any]]
    description: str = ""
    problems: dict[int | str, dict[str, Any]] = field(default_factory=dict)  # ``problem_responses`` of the body

    @staticmethod
    def request_body_of(model: type[BaseModel], examples: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """An operation's ``requestBody`` of JSON content only (a route that reads its body itself)."""
        return {"requestBody": {"required": True, "content": {JSON_MEDIA_TYPE: _content(model, examples)}}}


def is_json(scope: Scope) -> bool:
    """Whether a request's Content-Type is JSON (``application/json`` or ``application/*+json``; its
    parameters, e.g. a charset, ignored)."""
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))
    return False


def install_json_bodies(app: FastAPI, bodies: Sequence[JsonBody], models: Sequence[type[BaseModel]] = ()) -> None:
    """Make ``app.openapi()`` show ``bodies`` beside the operations' own content, and the schemas of
    ``models`` (those of ``request_body_of``) in its components."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()
            _add_components(document, [*(body.model for body in bodies), *models])
            for body in bodies:
                operation = document["paths"][body.path][body.method]
                request = operation.setdefault("requestBody", {"required": True, "content": {}})
                request["content"][JSON_MEDIA_TYPE] = _content(body.model, body.examples)
                operation["description"] = f"{operation.get('description', '')}\n\n{body.description}".strip()
                _add_problems(operation, body.problems)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _content(model: type[BaseModel], examples: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema": {"$ref": _REF.format(model=model.__name__)},
        "examples": {name: {"value": value} for name, value in examples.items()},
    }


def _add_components(document: dict[str, Any], models: Sequence[type[BaseModel]]) -> None:
    _, top = models_json_schema([(model, "validation") for model in models], ref_template=_REF)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in top.get("$defs", {}).items():
        schemas.setdefault(name, schema)


def _add_problems(operation: dict[str, Any], problems: dict[int | str, dict[str, Any]]) -> None:
    """The problem statuses only the JSON body can cause, in the document's form (``openapi.py``'s)."""
    responses = operation.setdefault("responses", {})
    for status, response in problems.items():
        content = {
            media: {**entry, "schema": {"$ref": _REF.format(model="Problem")}}
            for media, entry in response["content"].items()
        }
        responses.setdefault(str(status), {"description": response["description"], "content": content})
