"""Delete the items a filter selects (Qdrant's points/delete with a filter, Milvus's ``delete(expr)``): the use
case of the service's ``POST /items/delete``. A delete that could remove what the client did not mean is
refused unless ``everything`` (``"all": true``) is asked for by name: an empty filter, a filter naming a
metadata key no item has (a typo: ``{"grpp": {"$ne": "big"}}`` matches every item) and a filter that matches
every item. The report carries the warnings a search by the same filter gives (``filter_warnings``);
``dry_run`` counts without deleting, under the same rule."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.query.chain import filter_warnings
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
    warnings: list[str] = field(default_factory=list)


def delete_matching(
    store: Store, where: Mapping[str, Any] | None, *, dry_run: bool = False, everything: bool = False
) -> DeleteReport:
    """Delete (or with ``dry_run`` count) the items of an open store that pass ``where``. An empty filter,
    one naming a key no item has and one that matches every item need ``everything``; ``everything`` with a
    filter that needs no such confirmation is refused as ambiguous."""
    parsed = parse_filter(where, "filter")
    if parsed is None and not everything:
        raise DataError('an empty filter would delete every item; send {"filter": {}, "all": true} to mean that')
    matches: list[Item] = []
    while page := store.scroll(parsed, matches[-1].id if matches else 0, SCROLL_PAGE):
        matches += page
    warnings = filter_warnings(store, parsed)
    if parsed is not None:
        _check_latch(len(matches), store.count, warnings, everything)
    if dry_run or not matches:
        return DeleteReport(len(matches), store.count, dry_run, warnings=warnings)
    deleted = store.remove([item.id for item in matches])
    return DeleteReport(deleted, store.count, False, matches, warnings)


def _check_latch(matched: int, count: int, warnings: list[str], everything: bool) -> None:
    """A filter that deletes every item or names a key no item has needs ``everything``; one that needs
    neither refuses it."""
    risky = matched > 0 and (matched == count or bool(warnings))
    if risky and not everything:
        why = "; ".join(warnings) or "it matches every item"
        raise DataError(
            f"this filter would delete {matched} of {count} items ({why}); check its keys, or send "
            '"all": true to mean it'
        )
    if everything and not risky:
        raise DataError(
            f'"all": true confirms a delete of every item or by a key no item has; this filter deletes {matched} '
            f'of {count} items: drop "all" to delete them'
        )
