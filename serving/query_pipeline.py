"""From an uploaded image to ranked hits: decode -> preprocess -> (batched) embed -> search -> hits.

The blocking parts (decoding, faiss, the item table) run in worker threads; the store is
only touched inside ``ServiceState.read`` so an add or remove never interleaves with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio
import numpy as np
from fastapi import UploadFile

from retrieval.indexing.data.image_io import open_rgb_bytes
from retrieval.indexing.model.preprocess import preprocess_image
from retrieval.indexing.store.item_search import Window, filter_warnings, ranked_pages
from retrieval.indexing.store.item_search import score_kind as score_kind_of
from retrieval.indexing.store.shared.item_filter import ItemFilter, parse_filter
from retrieval.serving.dependencies import Services
from retrieval.serving.item_views import search_hit
from retrieval.serving.schemas import (
    DEFAULT_K,
    RERANK_FACTOR,
    IndexKind,
    PostprocessName,
    ScoreKind,
    SearchHit,
    Timings,
)
from retrieval.serving.service_errors import InvalidParameterError, invalid_parameters
from retrieval.serving.settings import ServeSettings
from retrieval.serving.state import Snapshot
from retrieval.serving.uploads import check_content_type, read_upload


@dataclass(frozen=True)
class SearchParams:
    k: int
    index: IndexKind = "float"
    rerank: int | None = None
    where: ItemFilter | None = None
    postprocess: PostprocessName = "none"
    window: Window = Window()
    full_paths: bool = True  # the service's ``shows_paths``


@dataclass(frozen=True)
class FoundPage:
    """One query's hits as the response shows them, how many ``min_score`` cut, and the filter's warnings."""

    results: list[SearchHit]
    below_min_score: int = 0
    warnings: list[str] = field(default_factory=list)


def resolve_search_params(
    services: Services,
    k: int | None,
    index: IndexKind | None,
    rerank: int | None,
    filter_json: str | None = None,
    postprocess: PostprocessName | None = None,
    offset: int | None = None,
    min_score: float | None = None,
) -> SearchParams:
    """Apply defaults and the configured limits; out-of-range values and a bad filter are a 422 problem.
    ``offset + k`` may reach ``RERANK_FACTOR * k_max`` (the deepest page)."""
    k_max = services.settings.k_max
    k = DEFAULT_K if k is None else k
    if not 1 <= k <= k_max:
        raise InvalidParameterError(f"k must be between 1 and {k_max}, got {k}.")
    if rerank is not None and not k <= rerank <= RERANK_FACTOR * k_max:
        raise InvalidParameterError(f"rerank must be between k ({k}) and {RERANK_FACTOR * k_max}, got {rerank}.")
    deepest = RERANK_FACTOR * k_max
    if offset is not None and not 0 <= offset <= deepest - k:
        raise InvalidParameterError(
            f"offset must be between 0 and {deepest - k} (offset + k <= {deepest}), got {offset}."
        )
    with invalid_parameters():
        where = parse_filter(filter_json, "parameter 'filter'")
        window = Window(offset=offset or 0, min_score=min_score)
    return SearchParams(
        k=min(k, k_max),
        index=index or "float",
        rerank=rerank,
        where=where,
        postprocess=postprocess or "none",
        window=window,
        full_paths=services.settings.shows_paths,
    )


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def _decode_and_preprocess(data: bytes, name: str, settings: ServeSettings, snapshot: Snapshot) -> np.ndarray:
    """A corrupt, non-image or too-many-pixels upload raises DataError (a 400 problem naming ``name``)."""
    image = open_rgb_bytes(
        data, max_pixels=settings.max_pixels, name=name, max_decode_bytes=settings.max_decode_mb << 20
    )
    return preprocess_image(image, snapshot.embedder.manifest.preprocessing)


@dataclass(frozen=True)
class EmbeddedUpload:
    snapshot: Snapshot  # the model (and index) generation that embedded it
    data: bytes  # the file as uploaded
    vector: np.ndarray


async def embed_upload(
    services: Services, upload: UploadFile, snapshot: Snapshot, timings: Timings | None = None
) -> EmbeddedUpload:
    """Check, decode and embed one uploaded image with the model of ``snapshot`` (which the caller holds,
    ``ServiceState.hold``): the one upload -> vector path of searches and of ``POST /items``. Fills the
    decode/embed timings when given."""
    settings = services.settings
    timings = timings if timings is not None else Timings()
    check_content_type(upload)
    with services.admission.admit():  # 503 at once past max_queued_images (backpressure)
        start = time.perf_counter()
        data = await read_upload(upload, settings.max_upload_bytes)
        pixels = await anyio.to_thread.run_sync(
            _decode_and_preprocess,
            data,
            repr(upload.filename or "upload"),
            settings,
            snapshot,
            limiter=services.decode_limiter,
        )
        timings.decode_ms = _ms(start)
        start = time.perf_counter()
        vector = await services.batcher.embed(snapshot.embedder, pixels)
        timings.embed_ms = _ms(start)
    return EmbeddedUpload(snapshot, data, vector)


def hits_for(snapshot: Snapshot, vector: np.ndarray, params: SearchParams, exclude: int | None = None) -> FoundPage:
    """Search the store (caller holds the read lock) and attach labels/metadata; ``exclude`` drops one id."""
    warnings = filter_warnings(snapshot.store, params.where)
    if snapshot.store.count == 0:
        return FoundPage([], warnings=warnings)
    (page,) = ranked_pages(
        snapshot.store,
        vector.reshape(1, -1),
        params.k,
        kind=params.index,
        rerank=params.rerank,
        exclude=[exclude],
        where=params.where,
        postprocess=params.postprocess,
        window=params.window,
    )
    hits = [search_hit(item, score, params.full_paths) for item, score in page.hits]
    return FoundPage(hits, page.below_min_score, warnings)


def score_kind(params: SearchParams) -> ScoreKind:
    return score_kind_of(params.index, params.rerank, params.postprocess)


async def search_hits(
    services: Services,
    snapshot: Snapshot,
    vector: np.ndarray,
    params: SearchParams,
    timings: Timings,
    exclude: int | None = None,
) -> FoundPage:
    start = time.perf_counter()
    hits = await services.state.read(lambda snap: hits_for(snap, vector, params, exclude), snapshot)
    timings.search_ms = _ms(start)
    return hits
