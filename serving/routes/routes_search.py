"""``POST /search`` (images or words as a form, vectors or words as JSON: one route, one rule for both),
``POST /embed`` and ``GET /items/{id}/similar``. Each route reads the request into ``Query`` values and
``SearchSettings`` (``search_fields``) and hands them to the one search (``query_pipeline``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from fastapi import APIRouter, Depends, File, Form, Path, Request, UploadFile

from retrieval.indexing.common.errors import DataError, ItemNotFoundError
from retrieval.indexing.query.query import Query
from retrieval.indexing.usecases import SearchSettings
from retrieval.serving.api_models import vector_schemas
from retrieval.serving.api_models.schemas import (
    MAX_ITEM_ID,
    BatchSearchResponse,
    EmbedResponse,
    QueryResults,
    SearchResponse,
    Timings,
)
from retrieval.serving.dependencies import COMMON_CAUSES, Services, get_services
from retrieval.serving.http import api_examples
from retrieval.serving.http.json_bodies import is_json
from retrieval.serving.http.json_body_route import json_body
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import (
    InvalidParameterError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
)
from retrieval.serving.query_pipeline import FoundPage, embed_upload, search_images, search_queries, search_texts
from retrieval.serving.routes.search_fields import SearchParams, body_options, form_options, query_options, settings_of
from retrieval.serving.routes.strict_forms import StrictFormRoute

router = APIRouter(tags=["search"], route_class=StrictFormRoute)
UPLOAD_PROBLEMS = problem_responses(DataError, PayloadTooLargeError, UnsupportedMediaTypeError, *COMMON_CAUSES)
SIMILAR_PROBLEMS = problem_responses(ItemNotFoundError, *COMMON_CAUSES)

_IMAGE = (
    "the query image (JPEG, PNG, WebP, GIF, BMP, TIFF); send the field several times for a batch search (at most "
    "max_search_images of the server, 16 by default): the answer then holds 'batch', one result list per image in "
    "order, all embedded in one model call; a bad image among them fails the whole request, naming which"
)
_TEXT = (
    "words to search for, e.g. 'red pickup truck' (instead of an image; an index whose model has a text tower, "
    "GET /readyz: has_text); send the field several times for a batch, as images"
)


_POSITIVE = (
    "search by examples: more like this stored item (its id or key; send the field several times), the examples "
    "not returned; instead of image and text"
)


def _form_example(value: str) -> Query:
    return Query.item(int(value)) if value.isdigit() else Query.key(value)


@dataclass
class SearchInput:
    """What one ``POST /search`` asks: images, words or vectors (``kind``), the settings it sent, and whether
    it is a batch (several queries, or a JSON list: the answer then holds ``batch``)."""

    kind: str
    images: list[UploadFile] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    vectors: list[Query] = field(default_factory=list)
    options: SearchParams = SearchParams()
    batch: bool = False

    @property
    def count(self) -> int:
        return len(self.images) + len(self.texts) + len(self.vectors)


@router.post(
    "/search",
    response_model=SearchResponse | BatchSearchResponse,
    responses={**api_examples.example(api_examples.SEARCH), **UPLOAD_PROBLEMS},
    summary="Find the items most similar to an image or a text (or to each of several: a batch search)",
)
async def search(
    request: Request,
    image: list[UploadFile] | None = File(None, description=_IMAGE),
    text: list[str] | None = Form(None, description=_TEXT),
    positive: list[str] | None = Form(None, description=_POSITIVE),
    negative: list[str] | None = Form(None, description="with positive: less like this stored item (id or key)"),
    from_query: SearchParams = Depends(query_options),
    from_form: SearchParams = Depends(form_options),
    services: Services = Depends(get_services),
) -> SearchResponse | BatchSearchResponse:
    """The one route of ``POST /search``: a form (images or words) or a JSON body (vectors or words), the
    settings from the query or from the body (not both), then the one search."""
    start = time.perf_counter()
    if is_json(request.scope):
        asked = json_input(await json_body(request, vector_schemas.VectorSearchRequest), from_query)
    else:
        options = from_query.merged(from_form, "a form field")
        asked = form_input(image or [], text or [], options, positive or [], negative or [])
    limit = services.settings.max_search_images
    if asked.count > limit:
        raise PayloadTooLargeError(
            f"{asked.count} {asked.kind} in one search exceed the limit of {limit} (max_search_images); "
            "send them in parts."
        )
    settings, timings = settings_of(services, asked.options), Timings()
    if asked.kind == "images":
        pages = await search_images(services, asked.images, settings, timings)
    elif asked.kind == "texts":
        pages = await search_texts(services, asked.texts, settings, timings)
    else:
        pages = await search_queries(services, asked.vectors, settings, timings)
    timings.total_ms = round((time.perf_counter() - start) * 1000.0, 3)
    return _batch_response(settings, pages, timings) if asked.batch else _response(settings, pages[0], timings)


def _example(value: int | str | list[float], model: str | None) -> Query:
    """A JSON example: an int is an item id, a str a key, a list of numbers a vector of ``model``."""
    if isinstance(value, int):
        return Query.item(value)
    return Query.key(value) if isinstance(value, str) else Query.vector(value, model)


def _examples_input(good: list[Query], bad: list[Query], options: SearchParams) -> SearchInput:
    """A search by examples: one query, its strategy the one asked for or ``average_vector``."""
    strategy = options.strategy or "average_vector"
    query = Query.examples(tuple(good), tuple(bad), strategy)
    return SearchInput("examples", vectors=[query], options=replace(options, strategy=strategy))


def _no_strategy(options: SearchParams) -> None:
    if options.strategy is not None:
        raise InvalidParameterError("strategy needs positive examples ('positive').")


def form_input(
    images: list[UploadFile], texts: list[str], options: SearchParams, positive: list[str], negative: list[str]
) -> SearchInput:
    """A form's search: images, words, or examples (``positive``/``negative``: item ids or keys), one of them."""
    if positive or negative:
        if images or texts:
            raise InvalidParameterError("send 'positive'/'negative' examples or 'image'/'text', not both.")
        return _examples_input(
            [_form_example(value) for value in positive], [_form_example(value) for value in negative], options
        )
    _no_strategy(options)
    if (not images) == (not texts):
        raise InvalidParameterError(
            "send one or more 'image' files or 'text' fields: a search is by images or by words."
        )
    kind = "images" if images else "texts"
    return SearchInput(kind, images, texts, options=options, batch=len(images) + len(texts) > 1)


def json_input(body: vector_schemas.VectorSearchRequest, from_query: SearchParams) -> SearchInput:
    """A JSON body's search: ``text`` (one, or a list: a batch), or ``vector`` / ``vectors`` (a batch) with
    their ``model``; the settings from the body or the query."""
    options = from_query.merged(body_options(body), "a JSON field")
    if body.positive is not None or body.negative is not None:
        if body.vector is not None or body.vectors is not None or body.text is not None:
            raise InvalidParameterError("send 'positive'/'negative' examples or 'vector'/'vectors'/'text', not both.")
        good = [_example(value, body.model) for value in body.positive or []]
        bad = [_example(value, body.model) for value in body.negative or []]
        return _examples_input(good, bad, options)
    _no_strategy(options)
    if body.text is not None:
        if body.vector is not None or body.vectors is not None or body.model is not None:
            raise InvalidParameterError(
                "send 'text' or 'vector'/'vectors' (with their 'model'), not both: a search is by words or by vectors."
            )
        texts = [body.text] if isinstance(body.text, str) else list(body.text)
        return SearchInput("texts", texts=texts, options=options, batch=not isinstance(body.text, str))
    if (body.vector is None) == (body.vectors is None):
        raise InvalidParameterError("send one of 'vector' (one query) and 'vectors' (a batch), not both or neither.")
    rows: list[Any] = [body.vector] if body.vector is not None else list(body.vectors or [])
    queries = [Query.vector(row, body.model) for row in rows]
    return SearchInput("vectors", vectors=queries, options=options, batch=body.vectors is not None)


@router.post(
    "/embed",
    response_model=EmbedResponse,
    responses={**api_examples.example(api_examples.EMBED), **UPLOAD_PROBLEMS},
    summary="Embed an image with the served model",
)
async def embed(
    image: UploadFile = File(description="the image to embed"),
    services: Services = Depends(get_services),
) -> EmbedResponse:
    with services.state.hold() as snapshot:
        upload = await embed_upload(services, image, snapshot)
    return EmbedResponse(
        embedding=upload.vector.astype(float).tolist(),
        dim=int(upload.vector.shape[0]),
        model_sha256=upload.snapshot.embedder.model_sha256,
    )


@router.get(
    "/items/{item_id}/similar",
    response_model=SearchResponse,
    responses={**api_examples.example(api_examples.SEARCH), **SIMILAR_PROBLEMS},
    summary="Find the items most similar to a stored item (the item itself excluded)",
)
async def similar(
    item_id: int = Path(ge=1, le=MAX_ITEM_ID, description="item id"),
    options: SearchParams = Depends(query_options),
    services: Services = Depends(get_services),
) -> SearchResponse:
    return await similar_to(Query.item(item_id), options, services)


async def similar_to(query: Query, options: SearchParams, services: Services) -> SearchResponse:
    """The answer of a similar-items route: the stored item's own vector searched, itself left out."""
    start = time.perf_counter()
    settings, timings = settings_of(services, options), Timings()
    (found,) = await search_queries(services, [query], settings, timings)
    timings.search_ms = timings.total_ms = round((time.perf_counter() - start) * 1000.0, 3)
    return _response(settings, found, timings)


def _batch_response(settings: SearchSettings, pages: list[FoundPage], timings: Timings) -> BatchSearchResponse:
    return BatchSearchResponse(
        **_echo(settings, pages[0].warnings, timings),
        batch=[
            QueryResults(
                image=page.name,
                below_min_score=page.below_min_score,
                below_min_probability=page.below_min_probability,
                results=page.results,
            )
            for page in pages
        ],
    )


def _echo(settings: SearchSettings, warnings: list[str], timings: Timings) -> dict[str, Any]:
    """The fields of ``_SearchEcho``: what every query of a search shares, by their HTTP names."""
    return {
        "index": settings.kind,
        "k": settings.k,
        "offset": settings.offset,
        "rerank": settings.rerank,
        "postprocess": settings.postprocess,
        "score_kind": settings.score_kind,
        "min_score": settings.min_score,
        "min_probability": settings.min_probability,
        "strategy": settings.strategy,
        "group_by": settings.group_by,
        "group_size": settings.group_size,
        "diversity": settings.diversity,
        "cutoff": settings.cutoff,
        "warnings": warnings,
        "timings": timings,
    }


def _response(settings: SearchSettings, found: FoundPage, timings: Timings) -> SearchResponse:
    return SearchResponse(
        **_echo(settings, found.warnings, timings),
        below_min_score=found.below_min_score,
        below_min_probability=found.below_min_probability,
        results=found.results,
    )
