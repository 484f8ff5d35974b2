"""Ranked (item, score) hits of an index: for query vectors, or for stored items (each left out of
its own results). The one search -> hits path of ``retrieval search``, the Python API's ``search`` and
the service's ``POST /search`` and ``GET /items/{id}/similar``: ``ranked_pages`` under one
``SearchSettings`` (``similar_pages``: the same for stored items); ``search_warnings`` gathers a search's warnings (a filter's
keys no item has, an unreliable calibration)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.indexing.exported_model.onnx_embedder import load_model_manifest
from retrieval.indexing.exported_model.resolution import resolve_query_model
from retrieval.indexing.probability.cutoff import auto_cutoff
from retrieval.indexing.probability.reliability_warnings import reliability_warnings
from retrieval.indexing.search.copy_groups import collapse_copies
from retrieval.indexing.search.copy_thresholds import copy_thresholds
from retrieval.indexing.store.calibrated_hits import calibration_kind, check_min_probability, with_probabilities
from retrieval.indexing.store.shared.items.item_filter import ItemFilter
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.postprocessed_search import postprocessed_search
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.store.shared.store_protocol import Store

MAX_KEYS_SHOWN = 50
COLLAPSE_OVERFETCH = 4
"""``collapse_duplicates`` fetches this many times the hits asked for, so that k remain after collapsing."""


@dataclass(frozen=True)
class HitPage:
    """The hits of one query under its settings (``offset`` skipped, at most ``k``), best first, and how
    many of its ``k`` scored below ``min_score``, or (of the rest) below ``min_probability``, and were cut."""

    hits: list[Hit]
    below_min_score: int = 0
    below_min_probability: int = 0


def ranked_pages(
    store: Store, vectors: np.ndarray, settings: SearchSettings, exclude: Sequence[int | None] | None = None
) -> list[HitPage]:
    """One page per query row, best first; ``exclude[i]`` is an item id dropped from row i. One extra
    result is fetched when an id is excluded, so ``k`` hits remain."""
    queries = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    dropped = list(exclude) if exclude is not None else [None] * len(queries)
    if len(dropped) != len(queries):
        raise ValueError(f"exclude has {len(dropped)} entries for {len(queries)} queries")
    calibration = store.manifest.model.calibration
    check_min_probability(calibration, settings)
    depth = settings.depth * (COLLAPSE_OVERFETCH if settings.collapse_duplicates else 1)
    if settings.postprocess != "none":
        results = postprocessed_search(store, queries, depth, settings, dropped)
        dropped = [None] * len(queries)  # already left out
    else:
        wanted = depth + (1 if any(item_id is not None for item_id in dropped) else 0)
        results = store.search(queries, wanted, kind=settings.kind, rerank=settings.rerank, where=settings.where)
    rows = [store.hits(results, row, exclude=dropped[row], limit=depth) for row in range(len(queries))]
    if settings.collapse_duplicates:
        threshold = copy_threshold_of(store)
        rows = [_collapsed(store, hits, threshold)[: settings.depth] for hits in rows]
    return [_page(with_probabilities(hits[settings.offset :], calibration, settings), settings) for hits in rows]


def copy_threshold_of(store: Store) -> float:
    """The cosine similarity above which two items of ``store`` are copies: its model's measured one."""
    model_dir = resolve_query_model(store.index_dir, store.manifest.model_dir)
    return copy_thresholds(load_model_manifest(model_dir).duplicates, None).cosine


def _collapsed(store: Store, hits: list[Hit], threshold: float) -> list[Hit]:
    """The best-ranked hit of each group of copies among ``hits``."""
    vectors = store.embeddings_of([hit.item.id for hit in hits]) if hits else np.empty((0, 1), np.float32)
    return [hits[i] for i in collapse_copies(np.asarray(vectors, np.float32), threshold)]


def similar_pages(store: Store, item_ids: Sequence[int], settings: SearchSettings) -> list[HitPage]:
    """The pages of each stored item's own embedding, the item itself left out (ItemNotFoundError for
    an unknown id)."""
    return ranked_pages(store, store.embeddings_of(list(item_ids)), settings, exclude=list(item_ids))


def _page(hits: list[Hit], settings: SearchSettings) -> HitPage:
    scored = [hit for hit in hits if settings.min_score is None or hit.score >= settings.min_score]
    cut = settings.min_probability
    kept = [hit for hit in scored if cut is None or (hit.probability is not None and hit.probability >= cut)]
    if settings.cutoff == "auto":
        kept = kept[: auto_cutoff(np.array([hit.probability or 0.0 for hit in kept]), cut)]
    return HitPage(kept, len(hits) - len(scored), len(scored) - len(kept))


def search_warnings(store: Store, settings: SearchSettings) -> list[str]:
    """Every warning a search under ``settings`` carries: the filter's keys no item has, and an unreliable
    calibration behind its probabilities (``probability.reliability_warnings``)."""
    calibration = store.manifest.model.calibration
    return [
        *filter_warnings(store, settings.where),
        *reliability_warnings(calibration, calibration_kind(settings), settings.min_probability),
    ]


def filter_warnings(store: Store, where: ItemFilter | None) -> list[str]:
    """A sentence for the metadata keys of ``where`` that no item has (a typo finds nothing, or with
    ``$ne`` everything), naming the keys items do have; none when every key is in use."""
    keys = where.keys() if where is not None else []
    missing = sorted(set(keys) - store.keys_in_use(keys)) if keys else []
    if not missing:
        return []
    known = store.metadata_keys()
    shown = ", ".join(known[:MAX_KEYS_SHOWN]) + (", ..." if len(known) > MAX_KEYS_SHOWN else "")
    names = ", ".join(f"'{key}'" for key in missing)
    return [f"no item has the metadata key {names}; the keys in use: {shown or 'none'}"]
