"""How the service shows a stored item: as a search hit (``SearchHit``) and as an item (``ItemResponse``:
``GET /items/{id}``, ``GET /items/by-key/{key}``, ``GET /items``), the one place both are made.

An item's ``path`` is where the server stores its image; with ``ServeSettings.shows_paths`` off (by
default when an API key is set: a service exposed beyond its owner) only the file name is shown, so the
server's directory layout stays private.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import PurePath
from typing import Any

import numpy as np

from retrieval.indexing.store.shared.items.items_db import Item
from retrieval.indexing.store.shared.store_protocol import Store
from retrieval.serving.api_models.schemas import ItemResponse, SearchHit
from retrieval.serving.api_models.vector_schemas import ItemWithVector
from retrieval.serving.images.item_images import image_url


def thumbnail_url(item_id: int) -> str:
    return f"/items/{item_id}/thumbnail"


def shown_path(path: str, full: bool) -> str:
    """The stored path, or only its file name."""
    return path if full else _file_name(path)


@lru_cache(maxsize=8192)
def _file_name(path: str) -> str:
    """(Remembered: pathlib's parsing took 4 us a hit, and hits are often the same items.)"""
    return PurePath(path).name


def item_response(item: Item, full_paths: bool) -> ItemResponse:
    return ItemResponse(**_shown_fields(item, full_paths))


def _shown_fields(item: Item, full_paths: bool) -> dict[str, Any]:
    """The fields an item shows, both as an item and as a search hit."""
    return {
        "id": item.id,
        "key": item.key,
        "label": item.label,
        "metadata": dict(item.metadata),
        "thumbnail_url": thumbnail_url(item.id),
        "path": shown_path(item.path, full_paths),
        "image_url": image_url(item.id),
    }


def item_view(item: Item, full_paths: bool, vector: np.ndarray | None = None) -> ItemResponse | ItemWithVector:
    """The item as ``item_response`` shows it, with its stored float ``vector`` when given (``with_vectors``)."""
    shown = item_response(item, full_paths)
    if vector is None:
        return shown
    return ItemWithVector(**shown.model_dump(), vector=np.asarray(vector, dtype=np.float64).tolist())


def search_hit(item: Item, score: float, full_paths: bool, probability: float | None = None) -> SearchHit:
    """(Validated once, as a hit: an ``ItemResponse`` made and dumped first took half of a binary search's time.)"""
    return SearchHit(score=score, probability=probability, **_shown_fields(item, full_paths))


def stored_with_vector(store: Store, item_id: int, with_vector: bool) -> tuple[Item, np.ndarray | None]:
    """(the item, its stored vector when asked for): read together, on the store thread."""
    return store.item(item_id), store.embedding(item_id) if with_vector else None
