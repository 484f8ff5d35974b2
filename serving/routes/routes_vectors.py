"""The index as a vector database: ``POST /items`` and ``POST /search`` with a JSON body (vectors made
elsewhere; the multipart routes of the same paths take images), ``POST /items/delete`` (by filter) and
``GET /items/by-key/{key}/similar``. Each route translates HTTP and calls its one use case
(``usecases.vectors``, ``usecases.deleting``); the JSON routes are ``JsonBodyRoute``s, so this router comes
before the multipart ones, and ``JSON_BODIES`` tells the OpenAPI document their bodies."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response

from retrieval.indexing.common.errors import (
    DataError,
    ItemNotFoundError,
    KeyConflictError,
    ModelMismatchError,
)
from retrieval.indexing.store.item_search import HitPage
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.usecases.deleting import delete_matching
from retrieval.indexing.usecases.vector_input import DEFAULT_LABEL, decoded_vector
from retrieval.indexing.usecases.vectors import VectorAdd, add_vectors_to, vector_pages
from retrieval.serving.api_models import vector_schemas as schemas
from retrieval.serving.api_models.schemas import (
    BatchSearchResponse,
    PutItemResponse,
    QueryResults,
    SearchResponse,
    Timings,
)
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
from retrieval.serving.item_views import search_hit
from retrieval.serving.query_pipeline import FoundPage, search_similar
from retrieval.serving.routes.routes_keys import checked_key
from retrieval.serving.routes.routes_search import (
    _check_batch_size,
    _echo,
    _kind,
    _response,
    answer_texts,
    search_settings,
)
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


@json_router.post("/search", include_in_schema=False)
async def search_by_vector(
    request: Request, services: Services = Depends(get_services)
) -> SearchResponse | BatchSearchResponse:
    start = time.perf_counter()
    body = await json_body(request, schemas.VectorSearchRequest)
    if body.text is not None:
        return await _search_by_text(body, services, start)
    if (body.vector is None) == (body.vectors is None):
        raise InvalidParameterError("send one of 'vector' (one query) and 'vectors' (a batch), not both or neither.")
    queries = [body.vector] if body.vector is not None else body.vectors or []
    if len(queries) > services.settings.max_search_images:
        raise PayloadTooLargeError(
            f"{len(queries)} vectors in one search exceed the limit of {services.settings.max_search_images} "
            "(max_search_images); send them in parts."
        )
    settings = _body_settings(services, body)
    timings = Timings()
    searched = time.perf_counter()
    with _as_invalid_parameters():
        found = await services.state.read(lambda snap: vector_pages(snap.store, queries, settings, model=body.model))
    timings.search_ms = round((time.perf_counter() - searched) * 1000.0, 3)
    pages = [_found(page, found.warnings, services) for page in found.pages]
    timings.total_ms = round((time.perf_counter() - start) * 1000.0, 3)
    if body.vector is not None:
        return _response(settings, pages[0], timings)
    batch = [
        QueryResults(image=f"vector {n}", below_min_score=page.below_min_score, results=page.results)
        for n, page in enumerate(pages, start=1)
    ]
    return BatchSearchResponse(**_echo(settings, found.warnings, timings), batch=batch)


async def _search_by_text(
    body: schemas.VectorSearchRequest, services: Services, start: float
) -> SearchResponse | BatchSearchResponse:
    """A JSON body with ``text``: refused beside vectors or a vectors' ``model``, else answered as the form's."""
    if body.vector is not None or body.vectors is not None or body.model is not None:
        raise InvalidParameterError(
            "send 'text' or 'vector'/'vectors' (with their 'model'), not both: a search is by words or by vectors."
        )
    texts = [body.text] if isinstance(body.text, str) else list(body.text or [])
    _check_batch_size(len(texts), services.settings.max_search_images, "texts")
    settings = _body_settings(services, body)
    return await answer_texts(services, texts, settings, start, batch=not isinstance(body.text, str))


def _body_settings(services: Services, body: schemas.VectorSearchRequest) -> SearchSettings:
    """The JSON body's search settings, checked as the form's (``search_settings``)."""
    return search_settings(
        services,
        body.k,
        _kind(body.kind, body.index),
        body.rerank,
        body.filter,
        body.postprocess,
        body.offset,
        body.min_score,
        body.min_probability,
        cutoff=body.cutoff,
    )


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
    k: int | None = Query(None, description="number of results (1..k_max of the server)"),
    kind: schemas.IndexKind | None = Query(None, description="'float' or 'binary'"),
    index: schemas.IndexKind | None = Query(None, description="the older name of `kind`", deprecated=True),
    rerank: int | None = Query(None, description="binary only: re-rank this many candidates by cosine"),
    filter_: str | None = Query(None, alias="filter", description="a JSON filter, as POST /search"),
    postprocess: schemas.PostprocessName | None = Query(None, description="'none', 'qe' or 'kreciprocal'"),
    offset: int | None = Query(None, description="skip this many of the best hits first"),
    min_score: float | None = Query(None, description="only hits scoring at least this"),
    min_probability: float | None = Query(None, description="only hits at least this likely to share the class"),
    cutoff: schemas.CutoffName | None = Query(None, description="'auto': per query the hits its probabilities choose"),
    services: Services = Depends(get_services),
) -> SearchResponse:
    start = time.perf_counter()
    key = checked_key(key)
    settings = search_settings(
        services, k, _kind(kind, index), rerank, filter_, postprocess, offset, min_score, min_probability, cutoff=cutoff
    )
    item = await services.state.read(lambda snap: snap.store.item_by_key(key))
    found = await search_similar(services, item.id, settings)
    timings = Timings()
    timings.search_ms = timings.total_ms = round((time.perf_counter() - start) * 1000.0, 3)
    return _response(settings, found, timings)


def _found(page: HitPage, warnings: list[str], services: Services) -> FoundPage:
    shows = services.settings.shows_paths
    return FoundPage(
        [search_hit(hit.item, hit.score, shows, hit.probability) for hit in page.hits],
        page.below_min_score,
        warnings,
        page.below_min_probability,
    )


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
