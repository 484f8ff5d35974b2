"""Delete the items a filter selects (Qdrant's points/delete with a filter, Milvus's ``delete(expr)``): the use
case of the service's ``POST /items/delete``. An empty filter is refused unless ``everything`` is asked for
by name, so a forgotten filter never empties an index; ``dry_run`` counts without deleting."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.store.shared.items.item_filter import parse_filter
from retrieval.indexing.store.shared.items.items_db import Item
from retrieval.indexing.store.shared.store_protocol import Store

SCROLL_PAGE = 10_000
"""Items read per scroll of the matches."""


@dataclass(frozen=True)
class DeleteReport:
    """How many items matched (and were deleted, unless a dry run), the index's size after, and the deleted
    items themselves (the service discards their stored uploads)."""

    deleted: int
    count: int
    dry_run: bool = False
    items: list[Item] = field(default_factory=list)


def delete_matching(
    store: Store, where: Mapping[str, Any] | None, *, dry_run: bool = False, everything: bool = False
) -> DeleteReport:
    """Delete (or with ``dry_run`` count) the items of an open store that pass ``where``; an empty filter
    needs ``everything`` (then every item), a filter with ``everything`` is refused as ambiguous."""
    parsed = parse_filter(where, "filter")
    if parsed is None and not everything:
        raise DataError('an empty filter would delete every item; send {"filter": {}, "all": true} to mean that')
    if parsed is not None and everything:
        raise DataError('"all": true deletes every item and takes an empty filter; drop "all" to delete the matches')
    matches: list[Item] = []
    while page := store.scroll(parsed, matches[-1].id if matches else 0, SCROLL_PAGE):
        matches += page
    if dry_run or not matches:
        return DeleteReport(len(matches), store.count, dry_run)
    deleted = store.remove([item.id for item in matches])
    return DeleteReport(deleted, store.count, False, matches)
