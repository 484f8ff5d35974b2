"""``GET /duplicates`` (the groups of near-duplicate items, largest first, page by page behind a cursor,
filterable by size and label) and ``GET /items/{id}/duplicates`` (one item's copies). Both call
``indexing.duplicates.index_duplicates``, as ``retrieval index duplicates`` does; the groups are computed once
per state of the index and threshold (``GroupCache``), on the store thread.

A cursor is the number of the last group shown and the build of the index, as ``GET /items``'s is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import APIRouter, Depends, Path, Query

from retrieval.indexing.common.errors import ConfigError, ItemNotFoundError
from retrieval.indexing.duplicates.index_duplicates import GroupCache, GroupFilter, item_duplicates
from retrieval.serving.api_models.schemas import MAX_ITEM_ID, DuplicateGroup, DuplicateGroupsPage, ItemDuplicates
from retrieval.serving.dependencies import Services, get_services
from retrieval.serving.http import api_examples
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import InvalidParameterError, RequestTimeoutError, RetryLaterError
from retrieval.serving.item_views import item_response, search_hit
from retrieval.serving.routes.routes_browse import make_cursor, read_cursor
from retrieval.serving.service_state import Snapshot

router = APIRouter(tags=["duplicates"])
_COMMON = (InvalidParameterError, RetryLaterError, RequestTimeoutError)
MAX_GROUPS_PAGE = 200
_THRESHOLD = "cosine similarity in [-1, 1] above which two items are copies (default: the model's measured one)"
_GROUPS = GroupCache()
_GROUPS_EXAMPLE = {
    "threshold": 0.742,
    "groups_total": 12,
    "duplicated_items": 27,
    "groups": [{"group": 1, "size": 2, "items": [api_examples.ITEM, {**api_examples.ITEM, "id": 18, "key": None}]}],
    "next_cursor": "eyJiIjoiMWE2YjNjIiwiYSI6MX0",
}
_ITEM_EXAMPLE = {"item_id": 17, "threshold": 0.742, "duplicates": [{**api_examples.SEARCH["results"][0], "id": 18}]}


@router.get(
    "/duplicates",
    response_model=DuplicateGroupsPage,
    responses={**api_examples.example(_GROUPS_EXAMPLE), **problem_responses(*_COMMON)},
    summary="Groups of near-duplicate items, largest first, page by page",
)
async def duplicate_groups(
    limit: int = Query(20, ge=1, le=MAX_GROUPS_PAGE, description="groups per page"),
    cursor: str | None = Query(None, max_length=200, description="next_cursor of the previous page"),
    min_size: int = Query(2, ge=2, description="only groups of at least this many items"),
    label: str | None = Query(None, max_length=1000, description="only groups holding an item of this label"),
    mixed_labels: bool = Query(False, description="only groups whose items carry more than one label"),
    threshold: float | None = Query(None, ge=-1.0, le=1.0, description=_THRESHOLD),
    services: Services = Depends(get_services),
) -> DuplicateGroupsPage:
    def page(snapshot: Snapshot) -> DuplicateGroupsPage:
        store = snapshot.store
        after = read_cursor(cursor, store.manifest) if cursor else 0
        with _missing_threshold():
            found = _GROUPS.groups(store, threshold)
        passing = GroupFilter(min_size, label, mixed_labels).numbers(store, found.groups)
        following = [number for number in passing if number > after]
        shown = [(number, store.items(found.groups[number - 1])) for number in following[:limit]]
        return DuplicateGroupsPage(
            threshold=found.thresholds.cosine,
            groups_total=len(passing),
            duplicated_items=sum(len(found.groups[number - 1]) for number in passing),
            groups=[
                DuplicateGroup(
                    group=number,
                    size=len(items),
                    mixed_labels=len({item.label for item in items if item is not None}) > 1,
                    items=[item_response(item, services.settings.shows_paths) for item in items if item is not None],
                )
                for number, items in shown
            ],
            next_cursor=make_cursor(shown[-1][0], store.manifest) if len(following) > limit and shown else None,
        )

    return await services.state.read(page)


@router.get(
    "/items/{item_id}/duplicates",
    response_model=ItemDuplicates,
    responses={**api_examples.example(_ITEM_EXAMPLE), **problem_responses(ItemNotFoundError, *_COMMON)},
    summary="The copies of a stored item (its neighbours above the copy threshold)",
)
async def duplicates_of_item(
    item_id: int = Path(ge=1, le=MAX_ITEM_ID, description="item id"),
    threshold: float | None = Query(None, ge=-1.0, le=1.0, description=_THRESHOLD),
    services: Services = Depends(get_services),
) -> ItemDuplicates:
    def copies(snapshot: Snapshot) -> ItemDuplicates:
        with _missing_threshold():
            found = item_duplicates(snapshot.store, item_id, threshold)
        return ItemDuplicates(
            item_id=item_id,
            threshold=found.threshold,
            duplicates=[search_hit(item, score, services.settings.shows_paths) for item, score in found.hits],
        )

    return await services.state.read(copies)


@contextmanager
def _missing_threshold() -> Iterator[None]:
    """An index whose model measured no copy threshold, asked without one: a 422 that says what to pass."""
    try:
        yield
    except ConfigError as error:
        raise InvalidParameterError(str(error)) from None
