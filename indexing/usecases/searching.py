"""Search an index for images or stored items: the use case of ``retrieval search`` and of the Python API's
``search``. Both describe their call as one ``SearchRequest`` (which index, the queries, the
``SearchSettings``, the query model) and hand it to ``search_index``, which reads top-down: open the
index, the filter's warnings, embed the images, ``item_search.ranked_pages`` (the service's path too),
then the texts (``inputs.embed_texts``: a model's text tower), the vectors and the stored items' own searches."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
from PIL import Image

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.text_encoder import checked_texts
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.item_search import Hit, HitPage, ranked_pages, search_warnings, similar_pages
from retrieval.indexing.store.shared.search_settings import SearchSettings, SettingsOptions, aliased
from retrieval.indexing.store.shared.store_protocol import Store
from retrieval.indexing.usecases.inputs import (
    ImageLike,
    PathLike,
    embed_images,
    embed_texts,
    query_embedder,
    query_text_encoder,
)
from retrieval.indexing.usecases.vector_input import normalised_warning
from retrieval.indexing.usecases.vectors import vector_pages

if TYPE_CHECKING:
    from typing_extensions import Unpack

Unreadable = Literal["report", "raise"]
"""An image that cannot be read: listed in ``SearchOutcome.failures`` (an error only when none can be read:
``retrieval search``), or a DataError at once (the Python API)."""


@dataclass(frozen=True)
class SearchRequest:
    """One search of an index: the ``images`` (files, or PIL images from the Python API) and the stored
    items ``item_ids`` (each left out of its own results) searched under ``settings``; the images embedded
    with ``model`` (None: the index's own copy), ``force`` searching even when it differs from the index's.
    ``vectors``: query vectors made elsewhere (``vectors.vector_pages`` checks them), searched as they are.
    ``texts``: words, embedded by the text tower beside the model (CLIP/SigLIP) into the images' space."""

    index_dir: Path
    settings: SearchSettings = SearchSettings()
    images: tuple[ImageLike, ...] = ()
    item_ids: tuple[int, ...] = ()
    model: Path | None = None
    force: bool = False
    vectors: np.ndarray | None = None
    texts: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        index: PathLike,
        images: Sequence[ImageLike] = (),
        item_ids: Sequence[int] = (),
        *,
        model: PathLike | None = None,
        force: bool = False,
        vectors: Any = None,
        texts: Sequence[str] = (),
        **options: Unpack[SettingsOptions],
    ) -> SearchRequest:
        """The request of the options as the commands and the Python API name them: ``options`` are
        ``SearchSettings.parse``'s (a bad setting is a DataError before any image is embedded)."""
        settings = SearchSettings.parse(**options)
        queries = tuple(image if isinstance(image, Image.Image) else Path(image) for image in images)
        given_model = Path(model) if model is not None else None
        given_vectors = None if vectors is None else np.asarray(vectors)
        request = cls(Path(index), settings, queries, tuple(item_ids), given_model, force, given_vectors)
        return replace(request, texts=tuple(checked_texts(texts))) if texts else request


@dataclass(frozen=True)
class QueryHits:
    """One query (an image file, or a stored item searched by id), its ranked hits and how many of its
    ``k`` scored below ``min_score``."""

    path: str
    item_id: int | None
    hits: list[Hit]
    below_min_score: int = 0
    below_min_probability: int = 0

    @classmethod
    def of_page(cls, name: str, page: HitPage) -> QueryHits:
        return cls(name, None, page.hits, page.below_min_score, page.below_min_probability)


@dataclass
class SearchOutcome:
    """What ``search_index`` found: the queries with their hits, the images it could not read, and the
    filter's warnings (a key no item has)."""

    queries: list[QueryHits]
    failures: list[tuple[Path, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class HitList(list[Hit]):
    """The hits of one image (a list of ``(Item, score)``, each with its ``probability``, best first),
    ``below_min_score``: how many of the ``k`` scored below ``min_score`` and were cut, and
    ``below_min_probability``: how many of the rest had a probability below ``min_probability``."""

    def __init__(self, hits: list[Hit], below_min_score: int = 0, below_min_probability: int = 0) -> None:
        super().__init__(hits)
        self.below_min_score = below_min_score
        self.below_min_probability = below_min_probability


def search(
    index: PathLike,
    images: ImageLike | Sequence[ImageLike] | None = None,
    k: int = 10,
    *,
    vectors: Any = None,
    texts: Sequence[str] | None = None,
    kind: str = "float",
    rerank: int | None = None,
    filter: Mapping[str, Any] | None = None,
    postprocess: str = "none",
    offset: int = 0,
    min_score: float | None = None,
    where: Mapping[str, Any] | None = None,
    min_probability: float | None = None,
    collapse_duplicates: bool = False,
    cutoff: str = "none",
) -> list[HitList]:
    """The ``k`` most similar items of each image (a path or a PIL image), embedded with the index's
    own model: per image a ``HitList`` of ``(Item, score)``, best first. ``filter`` keeps the items whose
    label and metadata match, like the service's ``filter`` (docs/serving.md), e.g.
    ``{"label": {"$in": ["a", "b"]}}`` (``where``: its older name); a key no item has is a ``UserWarning``. ``offset`` skips the best hits first (paging);
    ``min_score`` keeps the hits scoring at least it (``HitList.below_min_score``: how many were
    cut); ``postprocess``: none, qe or kreciprocal. ``vectors`` (one vector or a list, e.g. from another
    service that ran the index's model) are searched instead of or after the images: one HitList each.
    ``min_probability`` keeps the hits whose ``probability`` of sharing the query's class (the model's
    calibration) is at least it, a DataError on a model without calibration; ``cutoff="auto"`` keeps per query the
    first hits its own probabilities mark as worth keeping (``min_probability`` its floor; the hits it cuts count
    in ``below_min_probability``); ``collapse_duplicates``: one hit
    per group of copies (the model's measured copy threshold). ``texts``: words searched for (e.g. ``["red
    pickup truck"]``), one HitList each, on an index whose model has a text side (a CLIP or SigLIP export)."""
    queries = [images] if isinstance(images, str | Path | Image.Image) else list(images or [])
    if isinstance(texts, str):
        raise DataError("texts= takes a list of texts; write texts=[...] for one")
    if not queries and vectors is None and not texts:
        raise DataError("search() needs at least one image, or vectors=, or texts=")
    request = SearchRequest.of(
        index,
        queries,
        k=k,
        kind=kind,
        rerank=rerank,
        where=aliased("filter", filter, "where", where),
        postprocess=postprocess,
        offset=offset,
        min_score=min_score,
        vectors=vectors,
        texts=texts or (),
        min_probability=min_probability,
        collapse_duplicates=collapse_duplicates,
        cutoff=cutoff,
    )
    outcome = search_index(request, unreadable="raise")
    for warning in outcome.warnings:
        warnings.warn(warning, UserWarning, stacklevel=2)
    return [HitList(query.hits, query.below_min_score, query.below_min_probability) for query in outcome.queries]


def search_index(
    request: SearchRequest,
    *,
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = False,
    unreadable: Unreadable = "report",
) -> SearchOutcome:
    """The hits of each image of ``request`` (embedded in batches), then of each of its stored items (no
    model needed): request -> index -> filter warnings -> embed -> ``ranked_pages`` -> hits."""
    settings = request.settings
    embedder = query_embedder(request.index_dir, request.model, threads=threads) if request.images else None
    encoder, text_sha256 = (
        query_text_encoder(request.index_dir, request.model, threads=threads) if request.texts else (None, None)
    )
    sha256 = embedder.model_sha256 if embedder else text_sha256
    with open_store(request.index_dir, expected_model_sha256=sha256, force=request.force) as store:
        outcome = SearchOutcome([])
        if embedder is not None:
            names, vectors = _embedded(embedder, request.images, outcome, batch_size, progress, unreadable)
            found = search_vectors(store, vectors, settings)
            outcome.queries += [
                QueryHits(name, None, page.hits, page.below_min_score, page.below_min_probability)
                for name, page in zip(names, found.pages, strict=True)
            ]
        outcome.warnings = found.warnings if embedder is not None else search_warnings(store, settings)
        if encoder is not None:
            by_text = search_vectors(store, embed_texts(encoder, request.texts), settings)
            outcome.queries += [QueryHits.of_page(*pair) for pair in zip(request.texts, by_text.pages, strict=True)]
        if request.vectors is not None:
            by_vector = vector_pages(store, request.vectors, settings)
            outcome.warnings += normalised_warning(by_vector.normalised, len(by_vector.pages))
            outcome.queries += [
                QueryHits(f"vector {n}", None, page.hits, page.below_min_score, page.below_min_probability)
                for n, page in enumerate(by_vector.pages, start=1)
            ]
        if request.item_ids:
            pages = similar_pages(store, request.item_ids, settings)
            items = [store.item(item_id) for item_id in request.item_ids]
            outcome.queries += [
                QueryHits(item.path, item.id, page.hits, page.below_min_score, page.below_min_probability)
                for item, page in zip(items, pages, strict=True)
            ]
    return outcome


@dataclass(frozen=True)
class VectorPages:
    """The pages of a search of embedded queries (one per row), and the filter's warnings."""

    pages: list[HitPage]
    warnings: list[str]


def search_vectors(
    store: Store,
    vectors: np.ndarray,
    settings: SearchSettings,
    exclude: Sequence[int | None] | None = None,
    *,
    empty_ok: bool = False,
) -> VectorPages:
    """Everything a search does after the embedding, for every door (``search_index`` here, the service's
    ``query_pipeline``): the filter's warnings, then one page per (n, d) row under ``settings``; ``exclude[i]``
    is an item left out of row i (a stored item searched by its own embedding). An empty store: a page
    without hits per row when ``empty_ok`` (the service's answer), else a DataError."""
    warnings = search_warnings(store, settings)
    if empty_ok and store.count == 0:
        return VectorPages([HitPage([]) for _ in range(len(np.atleast_2d(vectors)))], warnings)
    return VectorPages(ranked_pages(store, vectors, settings, list(exclude) if exclude is not None else None), warnings)


def _embedded(
    embedder: OnnxEmbedder,
    images: Sequence[ImageLike],
    outcome: SearchOutcome,
    batch_size: int,
    progress: bool,
    unreadable: Unreadable,
) -> tuple[list[str], np.ndarray]:
    """(the names of the embedded images, their vectors); unreadable files go to ``outcome.failures``
    (``report``: an error only when none can be read) or raise (``raise``)."""
    if unreadable == "raise":
        names = ["" if isinstance(image, Image.Image) else str(image) for image in images]
        return names, embed_images(embedder, images)
    paths = cast(Sequence[Path], images)
    embedded = embedder.embed_paths(paths, batch_size=batch_size, progress=progress)
    outcome.failures = embedded.failures
    if not embedded.ok:
        first = embedded.failures[0][1]
        raise DataError(first if len(paths) == 1 else f"none of the {len(paths)} images could be read ({first})")
    return [str(paths[i]) for i in embedded.ok], embedded.embeddings
