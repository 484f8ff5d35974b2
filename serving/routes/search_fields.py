"""The search settings of the service's doors, with one name each wherever they are sent: as query
parameters (``query_options``: ``POST /search``, ``GET /items/{id}/similar``, ``GET /items/by-key/{key}/similar``),
as form fields (``form_options``: ``POST /search`` with images or words) or as JSON fields (``body_options``:
``POST /search`` with a JSON body). One rule for every door: a setting may come from the query or from the
body, not from both (a 422 naming it); ``settings_of`` checks them against the service's limits."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from fastapi import Form, Query
from fastapi.openapi.models import Example
from pydantic import BaseModel

from retrieval.indexing.usecases import SearchSettings, aliased
from retrieval.serving.api_models.schemas import DEFAULT_K, RERANK_FACTOR, CutoffName, IndexKind, PostprocessName
from retrieval.serving.dependencies import Services
from retrieval.serving.http.service_errors import InvalidParameterError, invalid_parameters

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
_STRATEGY = (
    "with positive examples: 'average_vector' (Qdrant's: avg(positive) + (avg(positive) - avg(negative)), the "
    "default) or 'best_score' (Qdrant's: each candidate by its best positive, pushed down when nearer a negative)"
)
_GROUP_BY = "'label' or a metadata key: the best k groups of items sharing it (exactly k when the index holds k)"
_GROUP_SIZE = "with group_by: hits per group, best first (default 1)"
_DIVERSITY = "0 (the plain order, default) to 1: MMR's weight of novelty over the first candidates"
_FILTER_EXAMPLES: dict[str, Example] = {
    "label and metadata": {"value": '{"label": "shoe", "shop": "berlin"}'},
    "operators": {"value": '{"label": {"$in": ["shoe", "boot"]}, "price": {"$gte": 10, "$lt": 50}}'},
}
_SAME = "same as the query parameter "


@dataclass(frozen=True)
class SearchParams:
    """The settings one place of a request gave (None: not given there), by their HTTP names."""

    k: int | None = None
    kind: IndexKind | None = None
    index: IndexKind | None = None
    rerank: int | None = None
    filter: str | dict[str, Any] | None = None
    postprocess: PostprocessName | None = None
    offset: int | None = None
    min_score: float | None = None
    min_probability: float | None = None
    collapse_duplicates: bool | None = None
    strategy: str | None = None
    group_by: str | None = None
    group_size: int | None = None
    diversity: float | None = None
    cutoff: CutoffName | None = None

    def given(self) -> dict[str, Any]:
        return {each.name: getattr(self, each.name) for each in fields(self) if getattr(self, each.name) is not None}

    def merged(self, other: SearchParams, where: str) -> SearchParams:
        """These (the query's) and ``other`` (the body's, sent as ``where``); a setting in both is a 422."""
        mine, theirs = self.given(), other.given()
        for name in theirs:
            if name in mine:
                raise InvalidParameterError(
                    f"'{name}' was sent both as a query parameter and as {where}; send it once."
                )
        return SearchParams(**mine, **theirs)


async def query_options(
    k: int | None = Query(None, description=_K),
    kind: IndexKind | None = Query(None, description=_KIND),
    index: IndexKind | None = Query(None, description=_INDEX, deprecated=True),
    rerank: int | None = Query(None, description=_RERANK),
    filter_: str | None = Query(None, alias="filter", description=_FILTER, openapi_examples=_FILTER_EXAMPLES),
    postprocess: PostprocessName | None = Query(None, description=_POSTPROCESS),
    offset: int | None = Query(None, description=_OFFSET),
    min_score: float | None = Query(None, description=_MIN_SCORE),
    min_probability: float | None = Query(None, description=_MIN_PROBABILITY),
    collapse_duplicates: bool | None = Query(None, description=_COLLAPSE),
    strategy: str | None = Query(None, description=_STRATEGY),
    group_by: str | None = Query(None, description=_GROUP_BY),
    group_size: int | None = Query(None, description=_GROUP_SIZE),
    diversity: float | None = Query(None, description=_DIVERSITY),
    cutoff: CutoffName | None = Query(None, description=_CUTOFF),
) -> SearchParams:
    """The settings sent as query parameters."""
    return SearchParams(
        k,
        kind,
        index,
        rerank,
        filter_,
        postprocess,
        offset,
        min_score,
        min_probability,
        collapse_duplicates,
        strategy,
        group_by,
        group_size,
        diversity,
        cutoff,
    )


async def form_options(
    k: int | None = Form(None, alias="k", description=_SAME + "k"),
    kind: IndexKind | None = Form(None, alias="kind", description=_SAME + "kind"),
    index: IndexKind | None = Form(None, alias="index", description=_INDEX, deprecated=True),
    rerank: int | None = Form(None, alias="rerank", description=_SAME + "rerank"),
    filter_: str | None = Form(None, alias="filter", description=_SAME + "filter"),
    postprocess: PostprocessName | None = Form(None, alias="postprocess", description=_SAME + "postprocess"),
    offset: int | None = Form(None, alias="offset", description=_SAME + "offset"),
    min_score: float | None = Form(None, alias="min_score", description=_SAME + "min_score"),
    min_probability: float | None = Form(None, alias="min_probability", description=_SAME + "min_probability"),
    collapse_duplicates: bool | None = Form(
        None, alias="collapse_duplicates", description=_SAME + "collapse_duplicates"
    ),
    strategy: str | None = Form(None, alias="strategy", description=_SAME + "strategy"),
    group_by: str | None = Form(None, alias="group_by", description=_SAME + "group_by"),
    group_size: int | None = Form(None, alias="group_size", description=_SAME + "group_size"),
    diversity: float | None = Form(None, alias="diversity", description=_SAME + "diversity"),
    cutoff: CutoffName | None = Form(None, alias="cutoff", description=_SAME + "cutoff"),
) -> SearchParams:
    """The settings sent as form fields (``StrictFormRoute`` refuses one sent as a query parameter as well)."""
    return SearchParams(
        k,
        kind,
        index,
        rerank,
        filter_,
        postprocess,
        offset,
        min_score,
        min_probability,
        collapse_duplicates,
        strategy,
        group_by,
        group_size,
        diversity,
        cutoff,
    )


def body_options(body: BaseModel) -> SearchParams:
    """The settings a JSON body sent (the fields it set, its defaults left out)."""
    names = {each.name for each in fields(SearchParams)}
    return SearchParams(**{name: getattr(body, name) for name in body.model_fields_set & names})


def settings_of(services: Services, options: SearchParams) -> SearchSettings:
    """The settings as ``SearchSettings`` (``filter`` is the ``where``), within the service's limits:
    ``k <= k_max``, ``k <= rerank <= RERANK_FACTOR * k_max`` and ``offset + k`` at most that deepest page.
    An out-of-range value or a bad filter is a 422 problem."""
    k_max = services.settings.k_max
    k = DEFAULT_K if options.k is None else options.k
    if not 1 <= k <= k_max:
        raise InvalidParameterError(f"k must be between 1 and {k_max}, got {k}.")
    deepest = RERANK_FACTOR * k_max
    rerank, offset = options.rerank, options.offset
    if rerank is not None and not k <= rerank <= deepest:
        raise InvalidParameterError(f"rerank must be between k ({k}) and {deepest}, got {rerank}.")
    if offset is not None and not 0 <= offset <= deepest - k:
        raise InvalidParameterError(
            f"offset must be between 0 and {deepest - k} (offset + k <= {deepest}), got {offset}."
        )
    with invalid_parameters():
        return SearchSettings.parse(
            k=k,
            kind=aliased("kind", options.kind, "index", options.index) or "float",
            rerank=rerank,
            where=options.filter,
            postprocess=options.postprocess or "none",
            offset=offset or 0,
            min_score=options.min_score,
            filter_name="parameter 'filter'",
            min_probability=options.min_probability,
            collapse_duplicates=bool(options.collapse_duplicates),
            strategy=options.strategy,
            group_by=options.group_by,
            group_size=1 if options.group_size is None else options.group_size,
            diversity=options.diversity,
            cutoff=options.cutoff,
        )
