"""Search an index for images or stored items: ``search`` (the Python API) and ``search_index``
(``retrieval search``), both through ``item_search.ranked_pages``, the service's path too."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from retrieval.indexing.api.inputs import ImageLike, PathLike, embed_images, query_embedder
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.kinds import KindName
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.item_search import Hit, Window, filter_warnings, ranked_pages, similar_pages
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, parse_filter


@dataclass(frozen=True)
class QueryHits:
    """One query (an image file, or a stored item searched by id), its ranked hits and how many of its
    ``k`` scored below ``min_score``."""

    path: str
    item_id: int | None
    hits: list[Hit]
    below_min_score: int = 0


@dataclass
class SearchOutcome:
    """What ``search_index`` found: the queries with their hits, the images it could not read, and the
    filter's warnings (a key no item has)."""

    queries: list[QueryHits]
    failures: list[tuple[Path, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class HitList(list[Hit]):
    """The hits of one image (a list of ``(Item, score)``, best first) and ``below_min_score``: how many
    of the ``k`` scored below ``min_score`` and were cut."""

    def __init__(self, hits: list[Hit], below_min_score: int = 0) -> None:
        super().__init__(hits)
        self.below_min_score = below_min_score


def search(
    index: PathLike,
    images: ImageLike | Sequence[ImageLike],
    k: int = 10,
    *,
    kind: KindName = "float",
    rerank: int | None = None,
    where: Mapping[str, Any] | None = None,
    postprocess: str = "none",
    offset: int = 0,
    min_score: float | None = None,
) -> list[HitList]:
    """The ``k`` most similar items of each image (a path or a PIL image), embedded with the index's
    own model: per image a ``HitList`` of ``(Item, score)``, best first. ``where`` filters by label and
    metadata like the service's ``filter`` (docs/serving.md), e.g. ``{"label": {"$in": ["a", "b"]}}``;
    a key no item has is a ``UserWarning``. ``offset`` skips the best hits first (paging);
    ``min_score`` keeps the hits scoring at least it (``HitList.below_min_score``: how many were
    cut); ``postprocess``: none, qe or kreciprocal."""
    queries = [images] if isinstance(images, str | Path | Image.Image) else list(images)
    if not queries:
        raise DataError("search() needs at least one image")
    window, item_filter = Window(offset=offset, min_score=min_score), parse_filter(where)
    embedder = query_embedder(Path(index))
    with open_store(Path(index), expected_model_sha256=embedder.model_sha256) as store:
        for warning in filter_warnings(store, item_filter):
            warnings.warn(warning, UserWarning, stacklevel=2)
        vectors = embed_images(embedder, queries)
        pages = ranked_pages(
            store, vectors, k, kind=kind, rerank=rerank, where=item_filter, postprocess=postprocess, window=window
        )
        return [HitList(page.hits, page.below_min_score) for page in pages]


def search_index(
    index_dir: Path,
    *,
    images: Sequence[Path] = (),
    item_ids: Sequence[int] = (),
    k: int = 10,
    kind: KindName = "float",
    rerank: int | None = None,
    where: ItemFilter | None = None,
    model: Path | None = None,
    force: bool = False,
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = False,
    postprocess: str = "none",
    window: Window = Window(),
) -> SearchOutcome:
    """``retrieval search``: the hits of each readable image file (embedded in batches with ``model``,
    by default the index's own; unreadable ones are reported, and an error only when none can be
    read), then of each stored item ``item_ids`` (itself left out; no model needed)."""
    embedder = query_embedder(index_dir, model, threads=threads) if images else None
    sha256 = embedder.model_sha256 if embedder else None
    with open_store(index_dir, expected_model_sha256=sha256, force=force) as store:
        outcome = SearchOutcome([], warnings=filter_warnings(store, where))
        if embedder is not None:
            embedded = embedder.embed_paths(images, batch_size=batch_size, progress=progress)
            outcome.failures = embedded.failures
            if not embedded.ok:
                first = embedded.failures[0][1]
                raise DataError(
                    first if len(images) == 1 else f"none of the {len(images)} images could be read ({first})"
                )
            pages = ranked_pages(
                store,
                embedded.embeddings,
                k,
                kind=kind,
                rerank=rerank,
                where=where,
                postprocess=postprocess,
                window=window,
            )
            outcome.queries += [
                QueryHits(str(images[i]), None, page.hits, page.below_min_score)
                for i, page in zip(embedded.ok, pages, strict=True)
            ]
        if item_ids:
            by_id = similar_pages(
                store, item_ids, k, kind=kind, rerank=rerank, where=where, postprocess=postprocess, window=window
            )
            items = [store.item(item_id) for item_id in item_ids]
            outcome.queries += [
                QueryHits(item.path, item.id, page.hits, page.below_min_score)
                for item, page in zip(items, by_id, strict=True)
            ]
    return outcome
