"""The one search use case of every door: ``search_store`` (an open store, ``Query`` values, the
``SearchSettings``) reads top-down: the filter's warnings, every query as a vector (``query_vectors``), then
the candidates and the chain of result steps (``query.chain.ranked_pages``). ``retrieval search`` and the
Python API's ``search`` describe their call as one ``SearchRequest`` and hand it to ``search_index`` (which
loads the model's ``ModelEncoders`` and opens the index); the service calls ``search_store`` itself.
"""

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
from retrieval.indexing.exported_model.text_encoder import TextEncoder, checked_texts
from retrieval.indexing.query.chain import ranked_pages, search_warnings
from retrieval.indexing.query.query import Query
from retrieval.indexing.query.steps.step import HitPage
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.shared.items.items_db import Hit
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
from retrieval.indexing.usecases.query_vectors import EmbeddedImages, QueryEncoders, QueryVectors, query_vectors

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
    ``vectors``: query vectors made elsewhere (``query_vectors`` checks them), searched as they are.
    ``texts``: words, embedded by the text tower beside the model (CLIP/SigLIP) into the images' space."""

    index_dir: Path
    settings: SearchSettings = SearchSettings()
    images: tuple[ImageLike, ...] = ()
    item_ids: tuple[int, ...] = ()
    model: Path | None = None
    force: bool = False
    vectors: np.ndarray | None = None
    texts: tuple[str, ...] = ()
    positive: tuple[Query, ...] = ()
    negative: tuple[Query, ...] = ()

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
        positive: Sequence[Any] = (),
        negative: Sequence[Any] = (),
        **options: Unpack[SettingsOptions],
    ) -> SearchRequest:
        """The request of the options as the commands and the Python API name them: ``options`` are
        ``SearchSettings.parse``'s (a bad setting is a DataError before any image is embedded). ``positive``
        and ``negative``: examples (``example_query``), searched together as one more query."""
        if positive or negative:
            options["strategy"] = options.get("strategy") or "average_vector"
        elif options.get("strategy") is not None:
            raise DataError('strategy needs positive examples (positive=, --positive, "positive").')
        settings = SearchSettings.parse(**options)
        queries = tuple(image if isinstance(image, Image.Image) else Path(image) for image in images)
        given_model = Path(model) if model is not None else None
        given_vectors = None if vectors is None else np.asarray(vectors)
        request = cls(Path(index), settings, queries, tuple(item_ids), given_model, force, given_vectors)
        if positive or negative:
            good, bad = tuple(map(example_query, positive)), tuple(map(example_query, negative))
            request = replace(request, positive=good, negative=bad)
        return replace(request, texts=tuple(checked_texts(texts))) if texts else request

    @property
    def has_images(self) -> bool:
        """Whether a model must embed images: the queries' or the examples'."""
        return bool(self.images) or any(example.kind == "image" for example in (*self.positive, *self.negative))

    def queries(self) -> list[Query]:
        """The request's queries in the order they are answered: images, texts, vectors, stored items."""
        vectors = [] if self.vectors is None else list(np.atleast_2d(self.vectors))
        return [
            *(Query.image(image) for image in self.images),
            *(Query.text(text) for text in self.texts),
            *(Query.vector(vector) for vector in vectors),
            *(Query.item(item_id) for item_id in self.item_ids),
            *(
                [Query.examples(self.positive, self.negative, self.settings.strategy or "")]
                if self.strategy_set
                else []
            ),
        ]

    @property
    def strategy_set(self) -> bool:
        return bool(self.positive or self.negative)


@dataclass(frozen=True)
class QueryHits:
    """One query (an image file, or a stored item searched by id), its ranked hits and how many of its
    ``k`` scored below ``min_score``."""

    path: str
    item_id: int | None
    hits: list[Hit]
    below_min_score: int = 0
    below_min_probability: int = 0


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
    item_ids: Sequence[int] = (),
    positive: Sequence[Any] | None = None,
    negative: Sequence[Any] | None = None,
    strategy: str | None = None,
    group_by: str | None = None,
    group_size: int = 1,
    diversity: float | None = None,
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
    pickup truck"]``), one HitList each, on an index whose model has a text side (a CLIP or SigLIP export).
    ``item_ids``: stored items searched by their own vectors, each left out of its own hits (one HitList each,
    after the images', texts' and vectors').
    ``positive`` / ``negative``: examples (item ids, keys, image paths or PIL images, vectors), one more HitList
    of the items most like the positives and least like the negatives, the examples left out; ``strategy``:
    average_vector (the default) or best_score. ``group_by`` ("label" or a metadata key) and
    ``group_size``: the best ``k`` groups, ``group_size`` hits each, group after group; ``diversity`` (0 to
    1): MMR over the first candidates."""
    queries = [images] if isinstance(images, str | Path | Image.Image) else list(images or [])
    if isinstance(texts, str):
        raise DataError("texts= takes a list of texts; write texts=[...] for one")
    if not queries and vectors is None and not texts and not item_ids and not positive and not negative:
        raise DataError("search() needs at least one image, or vectors=, texts=, item_ids= or positive=")
    request = SearchRequest.of(
        index,
        queries,
        item_ids,
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
        positive=positive or (),
        negative=negative or (),
        strategy=strategy,
        group_by=group_by,
        group_size=group_size,
        diversity=diversity,
        cutoff=cutoff,
    )
    outcome = search_index(request, unreadable="raise")
    for warning in outcome.warnings:
        warnings.warn(warning, UserWarning, stacklevel=2)
    return [HitList(query.hits, query.below_min_score, query.below_min_probability) for query in outcome.queries]


def example_query(example: Any) -> Query:
    """One example as the Python API and the commands give it: an int is a stored item's id, a str its key,
    a path or a PIL image an image, a sequence of numbers a vector."""
    if isinstance(example, bool):
        raise DataError(f"an example must be an item id, a key, an image or a vector, got {example!r}")
    if isinstance(example, int | np.integer):
        return Query.item(int(example))
    if isinstance(example, str):
        return Query.key(example)
    if isinstance(example, Path | Image.Image):
        return Query.image(example)
    if isinstance(example, Query):
        return example
    return Query.vector(np.asarray(example, dtype=np.float32))


def search_index(
    request: SearchRequest,
    *,
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = False,
    unreadable: Unreadable = "report",
) -> SearchOutcome:
    """``search_store`` of the index of ``request``: its model and text tower loaded as its queries need
    (``ModelEncoders``), the index opened against that model, then the one search."""
    embedder = query_embedder(request.index_dir, request.model, threads=threads) if request.has_images else None
    encoder, text_sha256 = (
        query_text_encoder(request.index_dir, request.model, threads=threads) if request.texts else (None, None)
    )
    encoders = ModelEncoders(embedder, encoder, batch_size, progress, unreadable)
    sha256 = embedder.model_sha256 if embedder else text_sha256
    with open_store(request.index_dir, expected_model_sha256=sha256, force=request.force) as store:
        return search_store(store, request.queries(), request.settings, encoders)


def search_store(
    store: Store, queries: Sequence[Query], settings: SearchSettings, encoders: QueryEncoders | None = None
) -> SearchOutcome:
    """The one search of every door (the commands, the Python API, the service's ``POST /search``, similar
    items, batches): the search's warnings (the filter's, an unreliable calibration's), every query as a vector
    (``query_vectors``), then the candidates and the chain of result steps (``query.chain.ranked_pages``). An empty index: no hits."""
    warnings = search_warnings(store, settings)
    return search_vectors(store, query_vectors(queries, store, encoders), settings, warnings)


def search_vectors(
    store: Store, found: QueryVectors, settings: SearchSettings, warnings: list[str] | None = None
) -> SearchOutcome:
    """``search_store`` after the queries became vectors (the service embeds its words before it takes the
    store, so that the store's thread never waits on a text tower)."""
    warnings = search_warnings(store, settings) if warnings is None else warnings
    if store.count == 0:
        pages = [HitPage([]) for _ in found.names]
    else:
        pages = ranked_pages(store, found.vectors, settings, found.item_ids, found.origins)
    queries = [
        QueryHits(name, item_id, page.hits, page.below_min_score, page.below_min_probability)
        for name, item_id, page in zip(found.names, found.item_ids, pages, strict=True)
    ]
    return SearchOutcome(queries, found.failures, [*warnings, *found.warnings])


@dataclass(frozen=True)
class ModelEncoders:
    """The ``QueryEncoders`` of the commands and the Python API: the index's model (``embedder``) and text
    tower (``text``), images read ``batch_size`` at a time; an unreadable image listed (``report``: an error
    only when none can be read) or a DataError at once (``raise``)."""

    embedder: OnnxEmbedder | None
    text: TextEncoder | None
    batch_size: int = 32
    progress: bool = False
    unreadable: Unreadable = "report"

    def embed_images(self, images: Sequence[ImageLike]) -> EmbeddedImages:
        if self.embedder is None:
            raise ValueError("no model to embed images with")
        if self.unreadable == "raise":
            return EmbeddedImages(list(range(len(images))), embed_images(self.embedder, images))
        paths = cast(Sequence[Path], images)
        embedded = self.embedder.embed_paths(paths, batch_size=self.batch_size, progress=self.progress)
        if not embedded.ok:
            first = embedded.failures[0][1]
            raise DataError(first if len(paths) == 1 else f"none of the {len(paths)} images could be read ({first})")
        return EmbeddedImages(list(embedded.ok), embedded.embeddings, list(embedded.failures))

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        if self.text is None:
            raise ValueError("no text tower to embed words with")
        return embed_texts(self.text, texts)
