"""From an uploaded image to ranked hits: decode -> preprocess -> (batched) embed -> search -> hits.

The blocking parts (decoding, faiss, the item table) run in worker threads; the store is
only touched inside ``ServiceState.read`` so an add or remove never interleaves with it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
import numpy as np
from fastapi import UploadFile

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.image_io import open_rgb_bytes
from retrieval.indexing.model.preprocess import preprocess_image
from retrieval.indexing.store.item_search import Window, filter_warnings, ranked_pages
from retrieval.indexing.store.item_search import score_kind as score_kind_of
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, parse_filter
from retrieval.serving.http.service_errors import InvalidParameterError, invalid_parameters
from retrieval.serving.images.uploads import check_content_type, read_upload
from retrieval.serving.item_views import search_hit
from retrieval.serving.routes.dependencies import Services
from retrieval.serving.routes.schemas import (
    DEFAULT_K,
    RERANK_FACTOR,
    IndexKind,
    PostprocessName,
    ScoreKind,
    SearchHit,
    Timings,
)
from retrieval.serving.settings import ServeSettings
from retrieval.serving.state import Snapshot


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
    """``embed_uploads`` of one image: the upload -> vector path of ``/embed`` and of ``POST /items``."""
    (embedded,) = await embed_uploads(services, [upload], snapshot, timings)
    return embedded


async def embed_uploads(
    services: Services, uploads: Sequence[UploadFile], snapshot: Snapshot, timings: Timings | None = None
) -> list[EmbeddedUpload]:
    """Check, decode and embed uploaded images with the model of ``snapshot`` (which the caller holds,
    ``ServiceState.hold``), in one model call. Every image is checked and decoded before any is embedded,
    so a bad one among several fails the request (its error names it: "image 2 of 3 ...") with nothing
    embedded. Fills the decode/embed timings when given."""
    settings = services.settings
    timings = timings if timings is not None else Timings()
    for number, upload in enumerate(uploads, 1):
        with _naming(number, len(uploads)):
            check_content_type(upload)
    with services.admission.admit(len(uploads)):  # 503 at once past max_queued_images (backpressure)
        start = time.perf_counter()
        files, pixels = [], []
        for number, upload in enumerate(uploads, 1):
            with _naming(number, len(uploads)):
                files.append(await read_upload(upload, settings.max_upload_bytes))
                pixels.append(await _decoded(services, files[-1], upload, snapshot))
        timings.decode_ms = _ms(start)
        start = time.perf_counter()
        vectors = await services.batcher.embed_many(snapshot.embedder, np.stack(pixels))
        timings.embed_ms = _ms(start)
    return [EmbeddedUpload(snapshot, data, vector) for data, vector in zip(files, vectors, strict=True)]


async def _decoded(services: Services, data: bytes, upload: UploadFile, snapshot: Snapshot) -> np.ndarray:
    name = repr(upload.filename or "upload")
    return await anyio.to_thread.run_sync(
        _decode_and_preprocess, data, name, services.settings, snapshot, limiter=services.decode_limiter
    )


@contextmanager
def _naming(number: int, count: int) -> Iterator[None]:
    """A bad image among several: the same error, its sentence starting with which image it is."""
    try:
        yield
    except DataError as error:
        if count == 1:
            raise
        raise type(error)(f"image {number} of {count}: {error}") from None


def pages_for(
    snapshot: Snapshot, vectors: np.ndarray, params: SearchParams, exclude: int | None = None
) -> list[FoundPage]:
    """Search the store for each (n, d) row in one call (caller holds the read lock) and attach
    labels/metadata; ``exclude`` drops one id."""
    warnings = filter_warnings(snapshot.store, params.where)
    if snapshot.store.count == 0:
        return [FoundPage([], warnings=warnings) for _ in vectors]
    pages = ranked_pages(
        snapshot.store,
        vectors,
        params.k,
        kind=params.index,
        rerank=params.rerank,
        exclude=[exclude] * len(vectors),
        where=params.where,
        postprocess=params.postprocess,
        window=params.window,
    )
    return [
        FoundPage(
            [search_hit(item, score, params.full_paths) for item, score in page.hits], page.below_min_score, warnings
        )
        for page in pages
    ]


def hits_for(snapshot: Snapshot, vector: np.ndarray, params: SearchParams, exclude: int | None = None) -> FoundPage:
    """``pages_for`` of one (d,) vector."""
    (page,) = pages_for(snapshot, vector.reshape(1, -1), params, exclude)
    return page


def score_kind(params: SearchParams) -> ScoreKind:
    return score_kind_of(params.index, params.rerank, params.postprocess)


async def search_pages(
    services: Services, snapshot: Snapshot, vectors: np.ndarray, params: SearchParams, timings: Timings
) -> list[FoundPage]:
    """``pages_for`` on the store thread, within ``snapshot`` (the generation that embedded ``vectors``)."""
    start = time.perf_counter()
    pages = await services.state.read(lambda snap: pages_for(snap, vectors, params), snapshot)
    timings.search_ms = _ms(start)
    return pages
