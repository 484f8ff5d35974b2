"""How the service shows a stored item: as a search hit (``SearchHit``) and as an item (``ItemResponse``:
``GET /items/{id}``, ``GET /items/by-key/{key}``, ``GET /items``), the one place both are made.

An item's ``path`` is where the server stores its image; with ``ServeSettings.shows_paths`` off (by
default when an API key is set: a service exposed beyond its owner) only the file name is shown, so the
server's directory layout stays private.
"""

from __future__ import annotations

from pathlib import PurePath

from retrieval.indexing.store.shared.items.items_db import Item
from retrieval.serving.images.item_images import image_url
from retrieval.serving.routes.schemas import ItemResponse, SearchHit


def thumbnail_url(item_id: int) -> str:
    return f"/items/{item_id}/thumbnail"


def shown_path(path: str, full: bool) -> str:
    """The stored path, or only its file name."""
    return path if full else PurePath(path).name


def item_response(item: Item, full_paths: bool) -> ItemResponse:
    return ItemResponse(
        id=item.id,
        key=item.key,
        label=item.label,
        metadata=dict(item.metadata),
        thumbnail_url=thumbnail_url(item.id),
        path=shown_path(item.path, full_paths),
        image_url=image_url(item.id),
    )


def search_hit(item: Item, score: float, full_paths: bool, probability: float | None = None) -> SearchHit:
    return SearchHit(score=score, probability=probability, **item_response(item, full_paths).model_dump())
