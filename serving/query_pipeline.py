"""From a request's queries to the hits it shows, read top-down: every door of the service builds ``Query``
values and hands them to the one search use case (``usecases.searching.search_store``) inside the snapshot's
store thread (``search_queries``: vectors, stored items by id or key). Uploaded images and words are embedded
first, outside the store's thread: ``search_images`` checks, decodes and embeds the uploads in one batched
model call (``embed_uploads``) and searches them as ``Query.embedded``; ``search_texts`` turns words into
vectors with the snapshot's text tower (``query_vectors``, the one place, in a worker thread) and searches
those (``search_vectors``). ``shown`` makes the hits what the response shows.

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
from retrieval.indexing.exported_model.model_manifest import Preprocessing
from retrieval.indexing.exported_model.no_model import NoModel, no_model_error
from retrieval.indexing.exported_model.preprocess import draft_size, preprocess_image
from retrieval.indexing.exported_model.text_encoder import checked_texts, no_text_side_error
from retrieval.indexing.query.query import Query
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.usecases.query_vectors import query_vectors
from retrieval.indexing.usecases.searching import ModelEncoders, SearchOutcome, search_store, search_vectors
from retrieval.serving.api_models.schemas import SearchHit, Timings
from retrieval.serving.dependencies import Services
from retrieval.serving.images.uploads import check_content_type, read_upload
from retrieval.serving.item_views import search_hit
from retrieval.serving.service_state import Snapshot
from retrieval.serving.settings import ServeSettings


@dataclass(frozen=True)
class FoundPage:
    """One query's hits as the response shows them, how many ``min_score`` cut, the search's warnings, how
    many ``min_probability`` cut, and the name of the query (a file name, the words, ``vector 2``)."""

    results: list[SearchHit]
    below_min_score: int = 0
    warnings: list[str] = field(default_factory=list)
    below_min_probability: int = 0
    name: str = ""


async def search_images(
    services: Services, images: Sequence[UploadFile], settings: SearchSettings, timings: Timings
) -> list[FoundPage]:
    """``POST /search`` with images: the uploads embedded by the model of the snapshot held for the request,
    then searched in that snapshot's store (the model that embeds the queries searches its own index)."""
    with services.state.hold() as snapshot:
        uploads = await embed_uploads(services, images, snapshot, timings)
        queries = [Query.embedded(up.vector, image.filename or "") for up, image in zip(uploads, images, strict=True)]
        return await search_queries(services, queries, settings, timings, snapshot)


async def search_texts(
    services: Services, texts: Sequence[str], settings: SearchSettings, timings: Timings
) -> list[FoundPage]:
    """``POST /search`` with ``text``: the words as vectors of the text tower of the snapshot held for the
    request (refused, one sentence, when its model has none), then searched as uploads are."""
    checked_texts(texts)  # before the snapshot is held: an empty list or a blank text is a 400 at once
    with services.state.hold() as snapshot:
        encoder = snapshot.text
        if encoder is None:
            raise no_text_side_error(snapshot.embedder.manifest)
        with services.admission.admit(len(texts)):  # a text holds a place as an image does (backpressure)
            start = time.perf_counter()
            queries = [Query.text(text) for text in texts]
            found = await anyio.to_thread.run_sync(query_vectors, queries, None, ModelEncoders(None, encoder))
            timings.embed_ms = _ms(start)
        start = time.perf_counter()
        outcome = await services.state.read(lambda snap: search_vectors(snap.store, found, settings), snapshot)
        timings.search_ms = _ms(start)
    return shown(outcome, services)


async def search_queries(
    services: Services,
    queries: Sequence[Query],
    settings: SearchSettings,
    timings: Timings,
    snapshot: Snapshot | None = None,
) -> list[FoundPage]:
    """The pages of ``queries`` that need no model (vectors, stored items, vectors embedded at the door),
    searched on the store thread of ``snapshot`` (None: the current one)."""
    start = time.perf_counter()
    outcome = await services.state.read(lambda snap: search_store(snap.store, queries, settings), snapshot)
    timings.search_ms = _ms(start)
    return shown(outcome, services)


def shown(outcome: SearchOutcome, services: Services) -> list[FoundPage]:
    """The pages of a search as the service shows its hits (paths as its settings say)."""
    full_paths = services.settings.shows_paths
    return [
        FoundPage(
            [search_hit(hit.item, hit.score, full_paths, hit.probability) for hit in query.hits],
            query.below_min_score,
            outcome.warnings,
            query.below_min_probability,
            query.path,
        )
        for query in outcome.queries
    ]


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def decode_query(data: bytes, name: str, settings: ServeSettings, prep: Preprocessing) -> np.ndarray:
    """An uploaded image as the model's input. A corrupt, non-image or too-many-pixels upload raises DataError
    (a 400 problem naming ``name``). A JPEG is decoded at reduced scale (``draft_decode``) and only the crop's
    region resized (``region_resize``) as the settings say."""
    reduce_to = draft_size(prep) if settings.draft_decode else None
    image = open_rgb_bytes(data, settings.max_pixels, name, settings.max_decode_mb << 20, reduce_to)
    return preprocess_image(image, prep, region_only=settings.region_resize)


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
    if isinstance(snapshot.embedder, NoModel):  # an index built from vectors alone: refused before any read
        raise no_model_error()
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
    prep = snapshot.embedder.manifest.preprocessing
    return await anyio.to_thread.run_sync(
        decode_query, data, name, services.settings, prep, limiter=services.decode_limiter
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
