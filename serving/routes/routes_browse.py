"""``GET /labels`` (how many items carry each label, or each value of a metadata key) and ``GET /items``
(every item that passes a filter, page by page behind a cursor).

A cursor is the last id of a page and the build of the index that gave it (``manifest.build_id``),
as opaque URL-safe text: ids only grow, so a page never shifts under adds and removes, and a cursor
from another build (the index rebuilt, or switched to another generation) is a 422.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

from fastapi import APIRouter, Depends, Query

from retrieval.indexing.query.chain import filter_warnings
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest
from retrieval.indexing.store.shared.items.item_filter import LABEL_KEY, check_key, parse_filter
from retrieval.serving.api_models.schemas import MAX_ITEM_ID, ItemsPage, ValueCount, ValueCounts
from retrieval.serving.api_models.vector_schemas import WITH_VECTORS, ItemsPageWithVectors
from retrieval.serving.dependencies import Services, get_services
from retrieval.serving.http import api_examples
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import (
    InvalidParameterError,
    RequestTimeoutError,
    RetryLaterError,
    invalid_parameters,
)
from retrieval.serving.item_views import item_view
from retrieval.serving.service_state import Snapshot

router = APIRouter(tags=["browse"])
PROBLEMS = problem_responses(InvalidParameterError, RetryLaterError, RequestTimeoutError)
MAX_PAGE = 1000
"""Items of one ``GET /items`` page."""
MAX_VALUES = 10000
"""Values of one ``GET /labels`` answer."""
_FILTER = "only items that match this JSON filter, the language of POST /search (docs/serving.md, 'Filters')"


@router.get(
    "/labels",
    response_model=ValueCounts,
    responses={**api_examples.example(api_examples.LABELS), **PROBLEMS},
    summary="How many items carry each label (or each value of a metadata key)",
)
async def labels(
    key: str | None = Query(None, description="a metadata key: count its values instead of the labels"),
    prefix: str = Query("", max_length=200, description="only values whose text starts with this (any case)"),
    limit: int = Query(1000, ge=1, le=MAX_VALUES, description="at most this many values, most items first"),
    services: Services = Depends(get_services),
) -> ValueCounts:
    if key is not None and key != LABEL_KEY:
        with invalid_parameters():
            check_key(key, "parameter 'key'")
    counted = None if key in (None, LABEL_KEY) else key

    def count(snapshot: Snapshot) -> ValueCounts:
        pairs = snapshot.store.value_counts(counted)
        wanted = [(v, n) for v, n in pairs if _text(v).casefold().startswith(prefix.casefold())]
        return ValueCounts(
            key=key or LABEL_KEY,
            distinct=len(wanted),
            values=[ValueCount(value=value, count=n) for value, n in wanted[:limit]],
        )

    return await services.state.read(count)


@router.get(
    "/items",
    response_model=ItemsPage | ItemsPageWithVectors,
    responses={**api_examples.example(api_examples.ITEMS_PAGE), **PROBLEMS},
    summary="Every item that passes a filter, page by page (ascending ids)",
)
async def list_items(
    filter_: str | None = Query(None, alias="filter", description=_FILTER),
    limit: int = Query(100, ge=1, le=MAX_PAGE, description="items per page"),
    cursor: str | None = Query(None, max_length=200, description="next_cursor of the previous page"),
    with_vectors: bool = Query(False, description=WITH_VECTORS),
    services: Services = Depends(get_services),
) -> ItemsPage | ItemsPageWithVectors:
    with invalid_parameters():
        where = parse_filter(filter_, "parameter 'filter'")

    def page(snapshot: Snapshot) -> ItemsPage:
        after = read_cursor(cursor, snapshot.store.manifest) if cursor else 0
        items = snapshot.store.scroll(where, after, limit + 1)  # one more says whether a next page exists
        full, items = len(items) > limit, items[:limit]
        vectors = snapshot.store.embeddings_of([item.id for item in items]) if with_vectors and items else None
        shown = [
            item_view(item, services.settings.shows_paths, None if vectors is None else vectors[n])
            for n, item in enumerate(items)
        ]
        page_type = ItemsPageWithVectors if with_vectors else ItemsPage
        return page_type(
            items=shown,
            next_cursor=make_cursor(items[-1].id, snapshot.store.manifest) if full else None,
            warnings=filter_warnings(snapshot.store, where),
        )

    return await services.state.read(page)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _build(manifest: IndexManifest) -> str:
    return hashlib.blake2b((manifest.build_id or manifest.created_at).encode(), digest_size=6).hexdigest()


def make_cursor(last_id: int, manifest: IndexManifest) -> str:
    """The cursor of the page after id ``last_id`` of this build of the index."""
    text = json.dumps({"b": _build(manifest), "a": int(last_id)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def read_cursor(cursor: str, manifest: IndexManifest) -> int:
    """The last id a cursor of this build names; a malformed cursor or another build's is a 422."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        build, after = decoded["b"], decoded["a"]
        if (
            not isinstance(after, int)
            or isinstance(after, bool)
            or not 0 <= after <= MAX_ITEM_ID
            or not isinstance(build, str)
        ):
            raise ValueError(after)
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeDecodeError):
        raise InvalidParameterError("cursor is not one this service gave out; send next_cursor as it came.") from None
    if build != _build(manifest):
        raise InvalidParameterError(
            "this cursor is from another build of the index (rebuilt or switched since); start again without one."
        )
    return after
