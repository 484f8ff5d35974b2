"""The JSON bodies of the vector endpoints (``POST /items`` and ``POST /search`` as ``application/json``,
``POST /items/delete``) and the item views that carry a stored vector (``with_vectors=true``), with one
example each for the OpenAPI document. Field names are those of the multipart form."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from retrieval.serving.api_models.schemas import (
    DEFAULT_K,
    AddItemsResponse,
    CutoffName,
    IndexKind,
    ItemResponse,
    ItemsPage,
    PostprocessName,
    _Strict,
)

_MODEL = (
    "the sha256 of the model that made the vectors, or its first 12 characters (GET /readyz: model_sha256); "
    "a vector of another model is a 409 naming both"
)
_VECTOR = "the embedding: the index's dimension of finite numbers, L2-normalised (else normalised, and said)"
WITH_VECTORS = "also return each item's stored float vector (as searched; float16 as stored, widened)"


class _StrictBody(_Strict):
    """A JSON request body read strictly: a boolean is ``true`` or ``false`` (``"yes"``, ``1`` or ``"t"`` once
    meant true, and ``{"filter": {}, "all": "yes"}`` emptied an index), a number is a JSON number (not
    ``"3"`` or ``true``), a vector's component too."""

    model_config = ConfigDict(strict=True)


_FILTER = 'only items that match this filter object (docs/serving.md, "Filters"), e.g. {"label": {"$in": ["a"]}}'


class VectorItem(_StrictBody):
    vector: list[float] | None = Field(None, description=f"{_VECTOR}; or send vector_b64")
    vector_b64: str | None = Field(
        None,
        description="the embedding as base64 of its little-endian float32 bytes (Python: "
        "base64.b64encode(v.astype('<f4').tobytes())): a quarter of the JSON text, parsed without a number "
        "per value; send it or 'vector'",
    )
    key: str | None = Field(None, description="the item's own id (unique per index); in use: a 409 on POST /items")
    label: str | None = Field(None, description="the item's class label; none: 'unlabelled'")
    metadata: dict[str, Any] = Field(default_factory=dict, description="as the form's 'metadata', one object")


class AddVectorsRequest(_StrictBody):
    """Items added by their vectors, made elsewhere with the index's model."""

    items: list[VectorItem] = Field(min_length=1, description="the items, each with its vector")
    model: str | None = Field(None, description=_MODEL)


class PutVectorRequest(_StrictBody):
    """The item a key names, by its vector: created, or replaced under its id."""

    vector: list[float] = Field(description=_VECTOR)
    label: str | None = Field(None, description="the item's class label; none: 'unlabelled'")
    metadata: dict[str, Any] = Field(default_factory=dict, description="the item's metadata, one object")
    model: str | None = Field(None, description=_MODEL)


class AddVectorsResponse(AddItemsResponse):
    normalised: int = Field(0, description="how many vectors were not L2-normalised and were normalised")
    warnings: list[str] = Field(default_factory=list)


class VectorSearchRequest(_StrictBody):
    """A search by one vector (``vector``) or a batch (``vectors``: the answer then holds ``batch``), or by
    words (``text``: one, or a list for a batch) embedded by the model's text tower."""

    vector: list[float] | None = Field(None, description=_VECTOR)
    vectors: list[list[float]] | None = Field(None, description="several query vectors: a batch search")
    text: str | list[str] | None = Field(
        None,
        description="words to search for (a model with a text tower, GET /readyz: has_text); a list: a batch "
        "search, one entry per text; instead of vector(s)",
    )
    k: int = Field(DEFAULT_K, description="number of results (1..k_max of the server)")
    kind: IndexKind | None = Field(
        None, description="'float' (cosine, the default) or 'binary' (Hamming over the sign bits)"
    )
    index: IndexKind | None = Field(None, description="the older name of `kind` (deprecated)")
    rerank: int | None = Field(None, description="binary only: re-rank this many Hamming candidates by cosine")
    filter: dict[str, Any] | None = Field(None, description=_FILTER)
    postprocess: PostprocessName = Field("none", description="'none', 'qe' or 'kreciprocal'")
    offset: int = Field(0, description="skip this many of the best hits first (paging)")
    min_score: float | None = Field(None, description="only hits scoring at least this (-1..1)")
    min_probability: float | None = Field(
        None, description="only hits at least this likely to share the query's class (0..1; a calibrated model)"
    )
    collapse_duplicates: bool | None = Field(
        None, description="one hit per group of copies (the best ranked; the model's measured copy threshold)"
    )
    cutoff: CutoffName = Field("none", description="'auto': per query the hits its probabilities choose")
    model: str | None = Field(None, description=_MODEL)
    positive: list[int | str | list[float]] | None = Field(
        None,
        description="search by examples: more like these (item ids, keys, or vectors of the index's model); "
        "the examples are not returned; instead of vector(s) and text",
    )
    negative: list[int | str | list[float]] | None = Field(None, description="with positive: less like these")
    strategy: str | None = Field(None, description="with positive: average_vector (default) or best_score")
    group_by: str | None = Field(None, description="'label' or a metadata key: the best k groups")
    group_size: int | None = Field(None, description="with group_by: hits per group (default 1)")
    diversity: float | None = Field(None, description="0 (plain, default) to 1: MMR over the first candidates")


class DeleteByFilterRequest(_StrictBody):
    filter: dict[str, Any] = Field(description=_FILTER + '; {} only with "all": true')
    dry_run: bool = Field(False, description="count the matches, delete nothing (refused where the delete is)")
    all: bool = Field(
        False,
        description="confirm a delete of every item: needed by an empty filter, a filter that matches every item "
        "and one naming a metadata key no item has (a typo); refused otherwise",
    )


class DeleteByFilterResponse(_Strict):
    deleted: int = Field(description="items deleted (a dry run: items that would be)")
    count: int = Field(description="items in the index after the call")
    dry_run: bool
    warnings: list[str] = Field(default_factory=list, description="as a search's: a filter key no item has")


class ItemWithVector(ItemResponse):
    vector: list[float] = Field(description="the stored float embedding (as searched)")


class ItemsPageWithVectors(ItemsPage):
    items: list[ItemWithVector] = Field(description="ascending ids")  # type: ignore[assignment]


ADD_VECTORS_EXAMPLE: dict[str, Any] = {
    "items": [
        {"vector": [0.12, -0.05, 0.33], "key": "sku-4711", "label": "boot", "metadata": {"shop": "berlin"}},
        {"vector": [0.02, 0.41, -0.18], "label": "shoe"},
        {"vector_b64": "j8L1PM3MTD0K1yM+", "label": "sock"},
    ],
    "model": "3f9a0c1d5e7b",
}
PUT_VECTOR_EXAMPLE: dict[str, Any] = {"vector": [0.12, -0.05, 0.33], "label": "boot", "metadata": {"v": 2}}
SEARCH_VECTOR_EXAMPLE: dict[str, Any] = {"vector": [0.12, -0.05, 0.33], "k": 5, "filter": {"label": "boot"}}
SEARCH_VECTORS_EXAMPLE: dict[str, Any] = {"vectors": [[0.12, -0.05, 0.33], [0.02, 0.41, -0.18]], "k": 5}
SEARCH_TEXT_EXAMPLE: dict[str, Any] = {"text": "red pickup truck", "k": 5, "filter": {"shop": "berlin"}}
DELETE_EXAMPLE: dict[str, Any] = {"filter": {"label": "boot", "shop": "berlin"}, "dry_run": True}
DELETE_ANSWER_EXAMPLE: dict[str, Any] = {"deleted": 12, "count": 4711, "dry_run": True, "warnings": []}
