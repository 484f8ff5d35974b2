"""Search an index for images or stored items: ``search`` (the Python API) and ``search_index``
(``retrieval search``), both through ``item_search.ranked_hits``, the service's path too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from retrieval.indexing.api.inputs import ImageLike, PathLike, embed_images, query_embedder
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.kinds import KindName
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.item_search import Hit, ranked_hits, similar_hits
from retrieval.indexing.store.shared.item_filter import ItemFilter, parse_filter


@dataclass(frozen=True)
class QueryHits:
    """One query (an image file, or a stored item searched by id) and its ranked hits."""

    path: str
    item_id: int | None
    hits: list[Hit]


@dataclass
class SearchOutcome:
    """What ``search_index`` found: the queries with their hits, and the images it could not read."""

    queries: list[QueryHits]
    failures: list[tuple[Path, str]] = field(default_factory=list)


def search(
    index: PathLike,
    images: ImageLike | Sequence[ImageLike],
    k: int = 10,
    *,
    kind: KindName = "float",
    rerank: int | None = None,
    where: Mapping[str, Any] | None = None,
    postprocess: str = "none",
) -> list[list[Hit]]:
    """The ``k`` most similar items of each image (a path or a PIL image), embedded with the index's
    own model: per image a list of ``(Item, score)``, best first. ``where`` filters by label and
    metadata like the service's ``filter``, e.g. ``{"label": "red_circle"}``; ``postprocess``: none,
    qe or kreciprocal."""
    queries = [images] if isinstance(images, str | Path | Image.Image) else list(images)
    if not queries:
        raise DataError("search() needs at least one image")
    embedder = query_embedder(Path(index))
    with open_store(Path(index), expected_model_sha256=embedder.model_sha256) as store:
        vectors = embed_images(embedder, queries)
        return ranked_hits(
            store, vectors, k, kind=kind, rerank=rerank, where=parse_filter(where), postprocess=postprocess
        )


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
) -> SearchOutcome:
    """``retrieval search``: the hits of each readable image file (embedded in batches with ``model``,
    by default the index's own; unreadable ones are reported, and an error only when none can be
    read), then of each stored item ``item_ids`` (itself left out; no model needed)."""
    embedder = query_embedder(index_dir, model, threads=threads) if images else None
    sha256 = embedder.model_sha256 if embedder else None
    with open_store(index_dir, expected_model_sha256=sha256, force=force) as store:
        outcome = SearchOutcome([])
        if embedder is not None:
            embedded = embedder.embed_paths(images, batch_size=batch_size, progress=progress)
            outcome.failures = embedded.failures
            if not embedded.ok:
                first = embedded.failures[0][1]
                raise DataError(
                    first if len(images) == 1 else f"none of the {len(images)} images could be read ({first})"
                )
            hits = ranked_hits(
                store, embedded.embeddings, k, kind=kind, rerank=rerank, where=where, postprocess=postprocess
            )
            outcome.queries += [
                QueryHits(str(images[i]), None, found) for i, found in zip(embedded.ok, hits, strict=True)
            ]
        if item_ids:
            found_by_id = similar_hits(
                store, item_ids, k, kind=kind, rerank=rerank, where=where, postprocess=postprocess
            )
            items = [store.item(item_id) for item_id in item_ids]
            outcome.queries += [
                QueryHits(item.path, item.id, found) for item, found in zip(items, found_by_id, strict=True)
            ]
    return outcome
