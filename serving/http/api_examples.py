"""One example body per operation for the OpenAPI document, so ``/docs`` shows what a call returns.

``tests/test_serving_openapi.py`` validates each example against its response model, so an
example cannot drift from the API it illustrates.
"""

from __future__ import annotations

from typing import Any

_MODEL_SHA = "3f9a0c1d5e7b2a4c6d8e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e"

SEARCH: dict[str, Any] = {
    "index": "float",
    "k": 2,
    "rerank": None,
    "postprocess": "none",
    "score_kind": "cosine",
    "results": [
        {
            "id": 17,
            "key": "sku-4711",
            "score": 0.912,
            "label": "Black_footed_Albatross",
            "metadata": {"filename": "albatross_0017.jpg"},
            "thumbnail_url": "/items/17/thumbnail",
            "path": "/srv/index/uploads/6b1f0c2e9d.jpg",
            "image_url": "/items/17/image",
        },
        {
            "id": 4,
            "score": 0.874,
            "label": "Black_footed_Albatross",
            "metadata": {},
            "thumbnail_url": "/items/4/thumbnail",
            "path": "/data/birds/001.Black_footed_Albatross/Black_Footed_Albatross_0004.jpg",
            "image_url": "/items/4/image",
        },
    ],
    "timings": {"decode_ms": 3.1, "embed_ms": 11.8, "search_ms": 0.4, "total_ms": 15.6},
}
EMBED: dict[str, Any] = {"embedding": [0.031, -0.118, 0.094], "dim": 3, "model_sha256": _MODEL_SHA}
ITEM: dict[str, Any] = {
    "id": 17,
    "key": "sku-4711",
    "label": "Black_footed_Albatross",
    "metadata": {"filename": "albatross_0017.jpg"},
    "thumbnail_url": "/items/17/thumbnail",
    "path": "/srv/index/uploads/6b1f0c2e9d.jpg",
    "image_url": "/items/17/image",
}
LABELS: dict[str, Any] = {
    "key": "label",
    "distinct": 2,
    "values": [{"value": "Black_footed_Albatross", "count": 60}, {"value": "Laysan_Albatross", "count": 58}],
}
ITEMS_PAGE: dict[str, Any] = {"items": [ITEM], "next_cursor": "eyJiIjoiMWE2YjNjIiwiYSI6MTd9", "warnings": []}
ADD_ITEMS: dict[str, Any] = {"ids": [201, 202], "count": 202}
DELETE_ITEM: dict[str, Any] = {"id": 17, "key": "sku-4711", "count": 201}
PUT_ITEM: dict[str, Any] = {"id": 203, "key": "sku-4711", "replaced": 17, "count": 202}
RELOAD: dict[str, Any] = {"count": 202, "model_sha256": _MODEL_SHA, "generation": 3}
HEALTH: dict[str, Any] = {"status": "ok"}
READY: dict[str, Any] = {
    "status": "ready",
    "count": 202,
    "model_sha256": _MODEL_SHA,
    "embedding_dim": 512,
    "k_max": 100,
}
METRICS = 'retrieval_http_requests_total{method="POST",route="/search",status="200"} 42.0\n'


def example(body: Any, status: int = 200, media_type: str = "application/json") -> dict[int | str, dict[str, Any]]:
    """A ``responses=`` entry that shows ``body`` as the example of the successful response."""
    return {status: {"content": {media_type: {"example": body}}}}
