"""Request and response models of every endpoint, so ``/docs`` documents the whole API."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from retrieval.indexing.store.shared.search_settings import ScoreKind

IndexKind = Literal["float", "binary"]
PostprocessName = Literal["none", "qe", "kreciprocal"]
CutoffName = Literal["none", "auto"]

MAX_ITEM_ID = 2**63 - 1
"""Item ids are SQLite INTEGER PRIMARY KEYs (>= 1); a larger path value is a 422, never an overflow."""
DEFAULT_K = 10
"""Results per search when the client does not say; the web page starts from the same number."""
RERANK_FACTOR = 10
"""``rerank`` may fetch up to this many times ``k_max`` candidates."""


_PATH = (
    "where the item's image is stored on the server: the indexed file, or for an image added with POST /items "
    "its copy in the index's uploads/ folder (the uploaded file name is then metadata 'filename'); only the "
    "file name when the server hides its paths (show_paths, by default when it has an API key)"
)
_IMAGE_URL = "the image at full size (GET /items/{id}/image)"
_KEY = "the item's own id given when it was added (unique per index; GET /items/by-key/{key}), or null"
_METADATA = (
    "the item's metadata: what POST /items was given (and the uploaded file name as 'filename'), "
    "or a CSV manifest's extra columns; match it with the searches' filter"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class Problem(_Strict):
    """RFC 9457 problem body returned with every 4xx/5xx."""

    type: str = Field(description="URI naming the problem type")
    title: str = Field(description="short summary of the status")
    status: int
    detail: str = Field(description="what went wrong and how to fix it")


class SearchHit(_Strict):
    id: int = Field(description="item id in the index")
    key: str | None = Field(None, description=_KEY)
    score: float = Field(description="higher is closer; see score_kind")
    probability: float | None = Field(
        None,
        description="calibrated probability (0..1) that the hit shares the query's class, read off its score by "
        "the model's calibration (fitted on its validation classes); null: the model has none, or the scores "
        "were post-processed",
    )
    label: str
    metadata: dict[str, Any] = Field(default_factory=dict, description=_METADATA)
    thumbnail_url: str
    path: str = Field(description=_PATH)
    image_url: str = Field(description=_IMAGE_URL)


class Timings(_Strict):
    decode_ms: float = 0.0
    embed_ms: float = 0.0
    search_ms: float = 0.0
    total_ms: float = 0.0


class _SearchEcho(_Strict):
    """What a search was asked for and what applies to all its queries."""

    index: IndexKind
    k: int
    offset: int = Field(0, description="how many of the best hits were skipped (paging)")
    rerank: int | None = None
    postprocess: PostprocessName = Field("none", description="the post-processing the results went through")
    score_kind: ScoreKind = Field(
        description="'cosine': cosine similarity (float and re-ranked binary searches, and after query expansion "
        "the expanded query's); 'hamming': 1 - 2 * Hamming distance / bits, the cosine of the sign codes (plain "
        "binary searches); 'kreciprocal': 1 - the k-reciprocal re-ranking distance"
    )
    min_score: float | None = Field(None, description="the threshold asked for, if any")
    min_probability: float | None = Field(None, description="the probability cut-off asked for, if any")
    strategy: str | None = Field(None, description="how the positive/negative examples were searched, if any")
    group_by: str | None = Field(None, description="the label or metadata key the hits were grouped by, if any")
    group_size: int = Field(1, description="hits per group (with group_by)")
    diversity: float | None = Field(None, description="MMR's weight of novelty, if asked (0: the plain order)")
    cutoff: CutoffName = Field("none", description="'auto': each query kept the hits its probabilities chose")
    warnings: list[str] = Field(
        default_factory=list,
        description="e.g. a filter key that no item has (the keys in use are named), or probabilities that rest "
        "on an unreliable calibration (too few validation classes)",
    )
    timings: Timings


_BELOW = "how many of the k hits scored below min_score and were cut"
_BELOW_PROBABILITY = "how many of the other hits had a probability below min_probability and were cut"


class SearchResponse(_SearchEcho):
    """The answer to one query image (or stored item)."""

    below_min_score: int = Field(0, description=_BELOW)
    below_min_probability: int = Field(0, description=_BELOW_PROBABILITY)
    results: list[SearchHit]


class QueryResults(_Strict):
    image: str = Field(
        description="the query: the image's file name as uploaded, 'vector N' (a JSON batch of vectors), or the "
        "words of a text search"
    )
    below_min_score: int = Field(0, description=_BELOW)
    below_min_probability: int = Field(0, description=_BELOW_PROBABILITY)
    results: list[SearchHit]


class BatchSearchResponse(_SearchEcho):
    """The answer to a batch search (several image fields in one POST /search): one entry per image, in the
    order they were sent; the images were embedded in one model call and searched in one store call."""

    batch: list[QueryResults]


class EmbedResponse(_Strict):
    embedding: list[float]
    dim: int
    model_sha256: str


class ItemResponse(_Strict):
    id: int
    key: str | None = Field(None, description=_KEY)
    label: str
    metadata: dict[str, Any] = Field(default_factory=dict, description=_METADATA)
    thumbnail_url: str
    path: str = Field(description=_PATH)
    image_url: str = Field(description=_IMAGE_URL)


class ValueCount(_Strict):
    value: str | int | float | bool | None = Field(description="a label, or a value of the metadata key")
    count: int = Field(description="items carrying it")


class ValueCounts(_Strict):
    key: str = Field(description="'label', or the metadata key counted")
    distinct: int = Field(description="how many values (matching the prefix) there are in all")
    values: list[ValueCount] = Field(description="most items first, ties by value")


class ItemsPage(_Strict):
    items: list[ItemResponse] = Field(description="ascending ids")
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last page")
    warnings: list[str] = Field(default_factory=list, description="e.g. a filter key that no item has")


class AddItemsResponse(_Strict):
    ids: list[int]
    count: int = Field(description="items in the index after the add")


class DeleteItemResponse(_Strict):
    id: int
    key: str | None = Field(None, description="the deleted item's key, if it had one")
    count: int = Field(description="items in the index after the delete")


class PutItemResponse(_Strict):
    id: int = Field(description="the item's id: a replaced item keeps its id, a new key gets a new one")
    key: str
    replaced: int | None = Field(None, description="the id of the item this one replaced; null when the key was new")
    count: int = Field(description="items in the index after the write")


class ReloadResponse(_Strict):
    count: int
    model_sha256: str
    generation: int = Field(description="increments on every successful reload")


class HealthResponse(_Strict):
    status: Literal["ok"] = "ok"


class ReadyResponse(_Strict):
    status: Literal["ready"] = "ready"
    count: int
    model_sha256: str
    embedding_dim: int
    k_max: int = Field(description="the largest k a search takes (offset + k may reach 10 x k_max: paging)")
    has_model: bool = Field(
        True, description="false: the index was built from vectors alone; it searches by vector only"
    )
    has_text: bool = Field(
        False,
        description="true: the model has a text tower (a CLIP or SigLIP export), so POST /search takes 'text'",
    )


# GET /duplicates and GET /items/{id}/duplicates (routes_duplicates)
class DuplicateGroup(_Strict):
    group: int = Field(description="the group's number, 1 for the largest")
    size: int
    mixed_labels: bool = Field(False, description="its items carry more than one label: possible label noise")
    items: list[ItemResponse] = Field(description="ascending ids")


class DuplicateGroupsPage(_Strict):
    threshold: float = Field(description="the cosine similarity the pairs reached")
    groups_total: int = Field(description="groups that pass the filters (min_size, label, mixed_labels), all pages")
    duplicated_items: int = Field(description="items in those groups")
    groups: list[DuplicateGroup] = Field(description="largest first")
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last page")


class ItemDuplicates(_Strict):
    item_id: int
    threshold: float
    duplicates: list[SearchHit] = Field(description="the item's copies, best first (the item itself left out)")


# GET /audit (routes_audit): the rows of `retrieval index audit`'s label_issues.csv
class AuditRow(_Strict):
    id: int = Field(description="the item's id (GET /items/{id}, /items/{id}/similar, /items/{id}/thumbnail)")
    path: str | None = Field(None, description="the item's image path (items without keys)")
    key: str | None = Field(None, description="the item's key (an index whose items have keys)")
    label: str
    suggested_label: str = Field(description="the class its neighbours and the class means point to ('' if none)")
    score: float = Field(description="1 - the share of the evidence for its label: higher = more likely mislabelled")


class AuditPage(_Strict):
    total: int = Field(description="items in the index")
    offset: int
    suspects: int = Field(description="items whose score reaches the suspect score (probably mislabelled)")
    rows: list[AuditRow] = Field(description="most suspect first")
