"""The OpenAPI document states what the running service really accepts and answers.

FastAPI builds the document from the routes; this hook adds what only the app knows or what
FastAPI cannot express: the bounds of ``k``, ``rerank``, ``offset`` and ``min_score`` (``k_max`` is a setting of this app),
and problem bodies under ``application/problem+json`` (FastAPI files every response model under
the route's JSON media type).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from retrieval.indexing.store.shared.search_settings import MIN_SCORE_RANGE
from retrieval.serving.api_models.schemas import DEFAULT_K, RERANK_FACTOR
from retrieval.serving.http.problems import PROBLEM_MEDIA_TYPE

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_PROBLEM_REF = "#/components/schemas/Problem"


def install_openapi(app: FastAPI, k_max: int) -> None:
    """Make ``app.openapi()`` (and so ``/openapi.json``, ``/docs``, ``/redoc``) state the real limits."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()
            bounds = search_bounds(k_max)
            for operation in _operations(document):
                _bound_search_parameters(operation, document, bounds)
                _problems_as_problem_json(operation)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def search_bounds(k_max: int) -> dict[str, dict[str, Any]]:
    """JSON schemas of the search parameters as ``routes_search.search_settings`` and ``SearchSettings`` enforce them."""
    return {
        "k": {"type": "integer", "minimum": 1, "maximum": k_max, "default": DEFAULT_K},
        "rerank": {"type": "integer", "minimum": 1, "maximum": RERANK_FACTOR * k_max},  # and >= k
        "kind": {"type": "string", "enum": ["float", "binary"], "default": "float"},
        "index": {"type": "string", "enum": ["float", "binary"]},  # the older name of kind
        "postprocess": {"type": "string", "enum": ["none", "qe", "kreciprocal"], "default": "none"},
        "offset": {"type": "integer", "minimum": 0, "maximum": RERANK_FACTOR * k_max - 1, "default": 0},  # + k too
        "min_score": {"type": "number", "minimum": MIN_SCORE_RANGE[0], "maximum": MIN_SCORE_RANGE[1]},
        "min_probability": {"type": "number", "minimum": 0, "maximum": 1},
        "cutoff": {"type": "string", "enum": ["none", "auto"], "default": "none"},
    }


def _operations(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for item in document.get("paths", {}).values() for method, op in item.items() if method in _METHODS]


def _bound_search_parameters(operation: dict[str, Any], document: dict[str, Any], bounds: dict[str, Any]) -> None:
    """Query parameters and multipart form fields named k, rerank, kind (index) or postprocess get their real schema."""
    for parameter in operation.get("parameters", []):
        if parameter.get("in") == "query" and parameter["name"] in bounds:
            parameter["schema"] = _bounded(parameter["schema"], bounds[parameter["name"]])
    form = operation.get("requestBody", {}).get("content", {}).get("multipart/form-data", {}).get("schema", {})
    ref = form.get("$ref", "")
    properties = _resolve(document, ref).get("properties", {}) if ref else form.get("properties", {})
    for name, schema in properties.items():
        if name in bounds:
            properties[name] = _bounded(schema, bounds[name])


def _bounded(schema: dict[str, Any], bound: dict[str, Any]) -> dict[str, Any]:
    """``bound`` in place of FastAPI's ``anyOf: [type, null]``; the field's title, description and deprecation stay."""
    kept: dict[str, Any] = {key: schema[key] for key in ("title", "description", "deprecated") if key in schema}
    return {**kept, **bound}


def _problems_as_problem_json(operation: dict[str, Any]) -> None:
    for status, response in operation.get("responses", {}).items():
        content = response.get("content", {})
        if int(status) < 400 or PROBLEM_MEDIA_TYPE not in content:
            continue
        content.pop("application/json", None)
        content[PROBLEM_MEDIA_TYPE]["schema"] = {"$ref": _PROBLEM_REF}


def _resolve(document: dict[str, Any], ref: str) -> dict[str, Any]:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node
