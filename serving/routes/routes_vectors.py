"""The index as a vector database: ``POST /items`` and ``PUT /items/by-key/{key}`` with a JSON body (vectors
made elsewhere; the multipart routes of the same paths take images), ``POST /items/delete`` (by filter) and
``GET /items/by-key/{key}/similar``. Each route translates HTTP and calls its one use case
(``usecases.vectors``, ``usecases.deleting``, the one search); the JSON routes are ``JsonBodyRoute``s, so this
router comes before the multipart ones, and ``JSON_BODIES`` tells the OpenAPI document their bodies (also
the JSON body of ``POST /search``, which its one route in ``routes_search`` reads)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import APIRouter, Depends, Header, Path, Request, Response

from retrieval.indexing.common.errors import (
    DataError,
    ItemNotFoundError,
    KeyConflictError,
    ModelMismatchError,
)
from retrieval.indexing.query.query import Query
from retrieval.indexing.usecases.deleting import delete_matching
from retrieval.indexing.usecases.vector_input import DEFAULT_LABEL, decoded_vector
from retrieval.indexing.usecases.vectors import VectorAdd, add_vectors_to
from retrieval.serving.api_models import vector_schemas as schemas
from retrieval.serving.api_models.schemas import PutItemResponse, SearchResponse
from retrieval.serving.dependencies import COMMON_CAUSES, WRITE_CAUSES, Services, get_services, require_api_key
from retrieval.serving.http import api_examples
from retrieval.serving.http.json_bodies import JsonBody
from retrieval.serving.http.json_body_route import JsonBodyRoute, json_body
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import (
    InvalidParameterError,
    PayloadTooLargeError,
    invalid_parameters,
)
from retrieval.serving.images.upload_storage import discard_item_upload
from retrieval.serving.routes.routes_keys import checked_key
from retrieval.serving.routes.routes_search import similar_to
from retrieval.serving.routes.search_fields import SearchOptions, query_options
from retrieval.serving.service_state import Snapshot

json_router = APIRouter(route_class=JsonBodyRoute)
router = APIRouter(tags=["items"])
JSON_BODIES = (
    JsonBody(
        "/items",
        "post",
        schemas.AddVectorsRequest,
        {"vectors": schemas.ADD_VECTORS_EXAMPLE},
        "or, as application/json, items by their vectors (made elsewhere with the index's model); the answer "
        "then also says how many vectors were normalised",
    ),
    JsonBody(
        "/items/by-key/{key}",
        "put",
        schemas.PutVectorRequest,
        {"vector": schemas.PUT_VECTOR_EXAMPLE},
        "or, as application/json, the item by its vector (label, metadata and model as JSON fields)",
    ),
    JsonBody(
        "/search",
        "post",
        schemas.VectorSearchRequest,
        {
            "one vector": schemas.SEARCH_VECTOR_EXAMPLE,
            "a batch": schemas.SEARCH_VECTORS_EXAMPLE,
            "by words": schemas.SEARCH_TEXT_EXAMPLE,
        },
        "or, as application/json, search by a vector ('vector') or a batch of them ('vectors': the answer holds "
        "'batch', its entries named 'vector 1', 'vector 2', ...), or by words ('text': one, or a list for a "
        "batch), the settings as JSON fields",
        problem_responses(ModelMismatchError),
    ),
)

BODY_MODELS = (schemas.DeleteByFilterRequest,)
"""The JSON bodies that routes here read themselves, shown by ``JsonBody.request_body_of``."""


@json_router.post("/items", include_in_schema=False, status_code=201, dependencies=[Depends(require_api_key)])
async def add_items_by_vector(
    request: Request,
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", min_length=1, max_length=200),
    services: Services = Depends(get_services),
) -> schemas.AddVectorsResponse:
    body = await json_body(request, schemas.AddVectorsRequest)
    limit = services.settings.max_vectors_per_request
    if len(body.items) > limit:
        raise PayloadTooLargeError(f"{len(body.items)} items in one request exceed the limit of {limit}; send parts.")
    wanted = VectorAdd(
        vectors=_item_vectors(body.items),
        labels=[item.label if item.label is not None else DEFAULT_LABEL for item in body.items],
        keys=[item.key for item in body.items],
        metadata=[item.metadata for item in body.items],
        model=body.model,
    )

    def add(current: Snapshot) -> schemas.AddVectorsResponse:
        with _as_invalid_parameters():
            report = add_vectors_to(current.store, wanted, idempotency_key=idempotency_key)
        return schemas.AddVectorsResponse(
            ids=report.ids, count=report.count, normalised=report.normalised, warnings=report.warnings
        )

    return await services.state.write(add)


@json_router.put("/items/by-key/{key:path}", include_in_schema=False, dependencies=[Depends(require_api_key)])
async def put_by_key_vector(
    request: Request, response: Response, key: str = Path(), services: Services = Depends(get_services)
) -> PutItemResponse:
    key = checked_key(key)
    body = await json_body(request, schemas.PutVectorRequest)
    label = body.label if body.label is not None else DEFAULT_LABEL
    wanted = VectorAdd([body.vector], [label], [key], [body.metadata], body.model, replace=True)

    def put(current: Snapshot) -> PutItemResponse:
        old = current.store.ids_of_keys([key]).get(key)
        old_path = current.store.item(old).path if old is not None else None
        with _as_invalid_parameters():
            report = add_vectors_to(current.store, wanted)
        if old_path is not None:
            discard_item_upload(services.settings.index_dir, current.store, old_path)
        return PutItemResponse(id=report.ids[0], key=key, replaced=old, count=report.count)

    answer = await services.state.write(put)
    response.status_code = 200 if answer.replaced is not None else 201
    return answer


@router.post(
    "/items/delete",
    response_model=schemas.DeleteByFilterResponse,
    responses={**api_examples.example(schemas.DELETE_ANSWER_EXAMPLE), **problem_responses(*WRITE_CAUSES)},
    openapi_extra=JsonBody.request_body_of(schemas.DeleteByFilterRequest, {"by filter": schemas.DELETE_EXAMPLE}),
    dependencies=[Depends(require_api_key)],
    summary="Delete every item that passes a filter; dry_run counts them (API key)",
)
async def delete_by_filter(
    request: Request, services: Services = Depends(get_services)
) -> schemas.DeleteByFilterResponse:
    body = await json_body(request, schemas.DeleteByFilterRequest)

    def remove(current: Snapshot) -> schemas.DeleteByFilterResponse:
        with invalid_parameters():
            report = delete_matching(current.store, body.filter, dry_run=body.dry_run, everything=body.all)
        for item in report.items:
            discard_item_upload(services.settings.index_dir, current.store, item.path)
        return schemas.DeleteByFilterResponse(deleted=report.deleted, count=report.count, dry_run=report.dry_run)

    return await services.state.write(remove)


@router.get(
    "/items/by-key/{key:path}/similar",
    response_model=SearchResponse,
    responses={**api_examples.example(api_examples.SEARCH), **problem_responses(ItemNotFoundError, *COMMON_CAUSES)},
    summary="Find the items most similar to the item carrying a key (the item itself excluded)",
)
async def similar_by_key(
    key: str = Path(description="the item's key"),
    options: SearchOptions = Depends(query_options),
    services: Services = Depends(get_services),
) -> SearchResponse:
    return await similar_to(Query.key(checked_key(key)), options, services)


def _item_vectors(items: list[schemas.VectorItem]) -> list[Any]:
    """Each item's vector: its ``vector``, or its ``vector_b64`` decoded (one of them, else a 422)."""
    vectors: list[Any] = []
    with _as_invalid_parameters():
        for number, item in enumerate(items, start=1):
            if (item.vector is None) == (item.vector_b64 is None):
                raise DataError(f"item {number}: send one of 'vector' and 'vector_b64', not both or neither")
            vectors.append(item.vector if item.vector_b64 is None else decoded_vector(item.vector_b64, number))
    return vectors


@contextmanager
def _as_invalid_parameters() -> Iterator[None]:
    """A DataError of the body's values (a vector's length, a label) is a 422; a key or model conflict stays
    a 409."""
    try:
        yield
    except (KeyConflictError, ModelMismatchError):
        raise
    except DataError as error:
        raise InvalidParameterError(str(error)) from None
