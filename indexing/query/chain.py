"""The one chain of result steps, and the search that runs it: ``ranked_pages`` fetches each query vector's
candidates (``candidates``: as deep as the steps ask) and passes every query's ``HitPage`` through
``RESULT_STEPS`` in order. The path of every door's search (``usecases.searching.search``).

A new option that changes the hits is one module in ``steps/`` (a ``ResultStep``) and one line in
``RESULT_STEPS``; ``filter_warnings`` names the keys of a filter that no item has, ``search_warnings`` gathers a
search's warnings (the filter's, and an unreliable calibration's: ``probability.reliability_warnings``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.indexing.probability.reliability_warnings import reliability_warnings
from retrieval.indexing.query.candidates import candidates
from retrieval.indexing.query.model_traits import ModelTraits
from retrieval.indexing.query.query import Query
from retrieval.indexing.query.steps.by_examples import ByExamples
from retrieval.indexing.query.steps.collapse_duplicates import CollapseDuplicates
from retrieval.indexing.query.steps.cutoff import Cutoff
from retrieval.indexing.query.steps.diversity import Diversity
from retrieval.indexing.query.steps.group_by import GroupBy
from retrieval.indexing.query.steps.min_score import MinScore
from retrieval.indexing.query.steps.page import Page
from retrieval.indexing.query.steps.probability import Probability, calibration_kind
from retrieval.indexing.query.steps.step import HitPage, ResultStep, StepContext
from retrieval.indexing.store.shared.items.item_filter import ItemFilter
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.store.shared.store_protocol import Store

MAX_KEYS_SHOWN = 50
RESULT_STEPS: tuple[ResultStep, ...] = (
    ByExamples(),  # positive / negative: the examples left out, best_score re-scores
    CollapseDuplicates(),  # one hit per group of copies (over-fetches 4x)
    Diversity(),  # MMR over the first candidates
    GroupBy(),  # group_by: offset and k count groups (the page step's cut, by group)
    Page(),  # offset and k: the page asked for
    MinScore(),  # min_score
    Probability(),  # probability, then min_probability
    Cutoff(),  # cutoff=auto: the page's best expected-F1 prefix of probabilities
)
"""The result steps, in the order they run over each query's candidates."""


def ranked_pages(
    store: Store,
    vectors: np.ndarray,
    settings: SearchSettings,
    exclude: Sequence[int | None] | None = None,
    origins: Sequence[Query] = (),
) -> list[HitPage]:
    """One page per query row after every step of ``RESULT_STEPS`` that the settings ask for, best first;
    ``exclude[i]`` is an item id left out of row i; ``origins[i]`` the ``Query`` of row i (for the steps)."""
    queries = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    dropped = list(exclude) if exclude is not None else [None] * len(queries)
    if len(dropped) != len(queries):
        raise ValueError(f"exclude has {len(dropped)} entries for {len(queries)} queries")
    context = StepContext(store, settings, queries, dropped, ModelTraits.of(store), origins)
    steps = [step for step in RESULT_STEPS if step.applies(settings)]
    for step in steps:
        step.check(context)
    depth = settings.depth
    for step in reversed(steps):
        depth = step.depth(depth, settings)
    pages = [HitPage(hits, row=row) for row, hits in enumerate(candidates(store, queries, settings, depth, dropped))]
    for step in steps:
        pages = [step.apply(page, context) for page in pages]
    return pages


def similar_pages(store: Store, item_ids: Sequence[int], settings: SearchSettings) -> list[HitPage]:
    """The pages of each stored item's own embedding, the item itself left out (ItemNotFoundError for
    an unknown id)."""
    return ranked_pages(store, store.embeddings_of(list(item_ids)), settings, exclude=list(item_ids))


def search_warnings(store: Store, settings: SearchSettings) -> list[str]:
    """Every warning a search under ``settings`` carries: the filter's keys no item has, and an unreliable
    calibration behind its probabilities (``probability.reliability_warnings``). Deletes by filter carry only
    ``filter_warnings``."""
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
