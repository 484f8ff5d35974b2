"""``POST /search``, ``POST /embed`` and ``GET /items/{id}/similar``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, File, Form, Path, Query, UploadFile
from fastapi.openapi.models import Example

from retrieval.indexing.common.errors import DataError, ItemNotFoundError
from retrieval.indexing.store.shared.search_settings import SearchSettings, aliased
from retrieval.serving.api_models.schemas import (
    DEFAULT_K,
    MAX_ITEM_ID,
    RERANK_FACTOR,
    BatchSearchResponse,
    CutoffName,
    EmbedResponse,
    IndexKind,
    PostprocessName,
    QueryResults,
    SearchResponse,
    Timings,
)
from retrieval.serving.dependencies import COMMON_CAUSES, Services, get_services
from retrieval.serving.http import api_examples
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import (
    InvalidParameterError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
    invalid_parameters,
)
from retrieval.serving.query_pipeline import FoundPage, embed_upload, search_images, search_similar, search_texts
from retrieval.serving.routes.strict_forms import StrictFormRoute

T = TypeVar("T")
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
_K = "number of results (1..k_max of the server)"
_KIND = "'float' (exact cosine) or 'binary' (Hamming over the sign bits, one per embedding dimension: 32x smaller)"
_INDEX = "the older name of kind, still accepted"
_RERANK = "with kind binary only: fetch this many candidates (k <= rerank <= 10 x k_max) by Hamming distance, re-rank them by float cosine"
_FILTER = (
    'only items that match this JSON object (docs/serving.md, "Filters"): "label" is the label, any other key a '
    "metadata key; a plain value means equal, an object holds operators: $in (any of a list), $ne, $gt, $gte, "
    '$lt, $lte (numbers), $exists (true/false); all keys must match, e.g. {"label": {"$in": ["shoe", "boot"]}, '
    '"price": {"$lt": 50}}; still k results when at least k match; a key no item has adds a warning'
)
_OFFSET = "skip this many of the best hits first (paging: offset + k <= 10 x k_max)"
_MIN_SCORE = (
    "only hits scoring at least this (-1..1, in the response's score_kind); below_min_score says how many of "
    "the k were cut"
)
_MIN_PROBABILITY = (
    "only hits whose calibrated probability of sharing the query's class is at least this (0..1, the model's "
    "calibration; refused with a 400 problem when the model has none); below_min_probability says how many "
    "were cut"
)
_CUTOFF = (
    "'auto': per query, keep the first hits its own calibrated probabilities mark as worth keeping (the count "
    "that maximises their expected F1; min_probability its floor; the hits cut count in below_min_probability); "
    "'none' (the default): keep all k"
)
_COLLAPSE = (
    "one hit per group of copies (the best ranked; copies by the model's measured copy threshold, "
    "GET /duplicates lists the groups)"
)
_POSTPROCESS = (
    "'none' (default), 'qe' (alpha-query expansion: the query plus its top hits, searched again) or "
    "'kreciprocal' (the top candidates re-ranked by k-reciprocal Jaccard distance); parameters: the index's"
)
_FILTER_EXAMPLES: dict[str, Example] = {
    "label and metadata": {"value": '{"label": "shoe", "shop": "berlin"}'},
    "operators": {"value": '{"label": {"$in": ["shoe", "boot"]}, "price": {"$gte": 10, "$lt": 50}}'},
}


@router.post(
    "/search",
    response_model=SearchResponse | BatchSearchResponse,
    responses={**api_examples.example(api_examples.SEARCH), **UPLOAD_PROBLEMS},
    summary="Find the items most similar to an image or a text (or to each of several: a batch search)",
)
async def search(
    image: list[UploadFile] | None = File(None, description=_IMAGE),
    text: list[str] | None = Form(None, description=_TEXT),
    k: int = Query(DEFAULT_K, description=_K),
    kind: IndexKind | None = Query(None, description=_KIND),
    index: IndexKind | None = Query(None, description=_INDEX, deprecated=True),
    rerank: int | None = Query(None, description=_RERANK),
    k_form: int | None = Form(None, alias="k", description="same as the query parameter k"),
    kind_form: IndexKind | None = Form(None, alias="kind", description="same as the query parameter kind"),
    index_form: IndexKind | None = Form(None, alias="index", description=_INDEX, deprecated=True),
    filter_: str | None = Query(None, alias="filter", description=_FILTER, openapi_examples=_FILTER_EXAMPLES),
    rerank_form: int | None = Form(None, alias="rerank", description="same as the query parameter rerank"),
    filter_form: str | None = Form(None, alias="filter", description="same as the query parameter filter"),
    postprocess: PostprocessName | None = Query(None, description=_POSTPROCESS),
    postprocess_form: PostprocessName | None = Form(
        None, alias="postprocess", description="same as the query parameter postprocess"
    ),
    offset: int | None = Query(None, description=_OFFSET),
    offset_form: int | None = Form(None, alias="offset", description="same as the query parameter offset"),
    min_score: float | None = Query(None, description=_MIN_SCORE),
    min_score_form: float | None = Form(None, alias="min_score", description="same as the query parameter min_score"),
    min_probability: float | None = Query(None, description=_MIN_PROBABILITY),
    min_probability_form: float | None = Form(
        None, alias="min_probability", description="same as the query parameter min_probability"
    ),
    collapse_duplicates: bool | None = Query(None, description=_COLLAPSE),
    collapse_duplicates_form: bool | None = Form(
        None, alias="collapse_duplicates", description="same as the query parameter collapse_duplicates"
    ),
    cutoff: CutoffName | None = Query(None, description=_CUTOFF),
    cutoff_form: CutoffName | None = Form(None, alias="cutoff", description="same as the query parameter cutoff"),
    services: Services = Depends(get_services),
) -> SearchResponse | BatchSearchResponse:
    start = time.perf_counter()
    if (not image) == (not text):
        raise InvalidParameterError(
            "send one or more 'image' files or 'text' fields: a search is by images or by words."
        )
    _check_batch_size(len(image or text or []), services.settings.max_search_images, "images" if image else "texts")
    settings = search_settings(
        services,
        _first(k_form, k),
        _kind(_first(kind_form, kind), _first(index_form, index)),
        _first(rerank_form, rerank),
        _first(filter_form, filter_),
        _first(postprocess_form, postprocess),
        _first(offset_form, offset),
        _first(min_score_form, min_score),
        _first(min_probability_form, min_probability),
        collapse_duplicates=bool(_first(collapse_duplicates_form, collapse_duplicates)),
        cutoff=_first(cutoff_form, cutoff),
    )
    if text:
        return await answer_texts(services, text, settings, start, batch=len(text) > 1)
    timings = Timings()
    pages = await search_images(services, image or [], settings, timings)
    timings.total_ms = round((time.perf_counter() - start) * 1000.0, 3)
    if len(pages) == 1:  # one image: the response of one query, as before batches
        return _response(settings, pages[0], timings)
    return _batch_response(settings, [upload.filename or "" for upload in image or []], pages, timings)


async def answer_texts(
    services: Services, texts: list[str], settings: SearchSettings, start: float, *, batch: bool
) -> SearchResponse | BatchSearchResponse:
    """The answer to a text search (form or JSON): one query's response, or a batch's (one entry per text)."""
    timings = Timings()
    pages = await search_texts(services, texts, settings, timings)
    timings.total_ms = round((time.perf_counter() - start) * 1000.0, 3)
    return _batch_response(settings, texts, pages, timings) if batch else _response(settings, pages[0], timings)


def _batch_response(
    settings: SearchSettings, names: list[str], pages: list[FoundPage], timings: Timings
) -> BatchSearchResponse:
    return BatchSearchResponse(
        **_echo(settings, pages[0].warnings, timings),
        batch=[
            QueryResults(
                image=name,
                below_min_score=page.below_min_score,
                below_min_probability=page.below_min_probability,
                results=page.results,
            )
            for name, page in zip(names, pages, strict=True)
        ],
    )


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
    k: int = Query(DEFAULT_K, description=_K),
    kind: IndexKind | None = Query(None, description=_KIND),
    index: IndexKind | None = Query(None, description=_INDEX, deprecated=True),
    rerank: int | None = Query(None, description=_RERANK),
    filter_: str | None = Query(None, alias="filter", description=_FILTER, openapi_examples=_FILTER_EXAMPLES),
    postprocess: PostprocessName | None = Query(None, description=_POSTPROCESS),
    offset: int | None = Query(None, description=_OFFSET),
    min_score: float | None = Query(None, description=_MIN_SCORE),
    min_probability: float | None = Query(None, description=_MIN_PROBABILITY),
    collapse_duplicates: bool = Query(False, description=_COLLAPSE),
    cutoff: CutoffName | None = Query(None, description=_CUTOFF),
    services: Services = Depends(get_services),
) -> SearchResponse:
    start = time.perf_counter()
    settings = search_settings(
        services,
        k,
        _kind(kind, index),
        rerank,
        filter_,
        postprocess,
        offset,
        min_score,
        min_probability,
        collapse_duplicates=collapse_duplicates,
        cutoff=cutoff,
    )
    timings = Timings()
    found = await search_similar(services, item_id, settings)
    timings.search_ms = timings.total_ms = round((time.perf_counter() - start) * 1000.0, 3)
    return _response(settings, found, timings)


def search_settings(
    services: Services,
    k: int | None,
    kind: IndexKind | None,
    rerank: int | None,
    filter_json: str | Mapping[str, Any] | None = None,
    postprocess: PostprocessName | None = None,
    offset: int | None = None,
    min_score: float | None = None,
    min_probability: float | None = None,
    *,
    collapse_duplicates: bool = False,
    cutoff: CutoffName | None = None,
) -> SearchSettings:
    """The HTTP parameters as ``SearchSettings`` (``filter`` is the ``where``), within the
    service's limits: ``k <= k_max``, ``k <= rerank <= RERANK_FACTOR * k_max`` and ``offset + k`` at most that
    deepest page. An out-of-range value or a bad filter is a 422 problem."""
    k_max = services.settings.k_max
    k = DEFAULT_K if k is None else k
    if not 1 <= k <= k_max:
        raise InvalidParameterError(f"k must be between 1 and {k_max}, got {k}.")
    deepest = RERANK_FACTOR * k_max
    if rerank is not None and not k <= rerank <= deepest:
        raise InvalidParameterError(f"rerank must be between k ({k}) and {deepest}, got {rerank}.")
    if offset is not None and not 0 <= offset <= deepest - k:
        raise InvalidParameterError(
            f"offset must be between 0 and {deepest - k} (offset + k <= {deepest}), got {offset}."
        )
    with invalid_parameters():
        return SearchSettings.parse(
            k=k,
            kind=kind or "float",
            rerank=rerank,
            where=filter_json,
            postprocess=postprocess or "none",
            offset=offset or 0,
            min_score=min_score,
            filter_name="parameter 'filter'",
            min_probability=min_probability,
            collapse_duplicates=collapse_duplicates,
            cutoff=cutoff,
        )


def _kind(kind: IndexKind | None, index: IndexKind | None) -> IndexKind | None:
    """``kind``, or ``index``: its older name; the two disagreeing is a 422."""
    with invalid_parameters():
        return aliased("kind", kind, "index", index)


def _first(*values: T | None) -> T | None:
    return next((value for value in values if value is not None), None)


def _check_batch_size(images: int, limit: int, what: str = "images") -> None:
    if images > limit:
        raise PayloadTooLargeError(
            f"{images} {what} in one search exceed the limit of {limit} (max_search_images); send them in parts."
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
