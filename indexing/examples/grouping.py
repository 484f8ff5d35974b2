"""``group_by``: the best ``k`` groups of a ranked candidate list, each with up to ``group_size`` hits: its best
among the candidates fetched.

A group ranks by its best hit, so over a prefix of the ranking the first ``k`` distinct keys are exactly the
best ``k`` groups of the whole index. ``grouped_search`` therefore fetches candidates, and fetches twice as
many while fewer than ``k`` groups have appeared and the index holds more: exactly ``k`` groups whenever the
index holds ``k`` (Milvus's strict semantics). Items without the key (``None``) belong to no group.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

FETCH_PER_GROUP = 10
"""The first fetch: ``k * max(group_size, FETCH_PER_GROUP)`` candidates (flat search costs nearly the same
for 10 or 1,000 hits, a second pass costs a whole scan)."""


@dataclass(frozen=True)
class Group:
    """One group: its key and its best hits' ids and scores, best first."""

    key: Hashable
    ids: list[int]
    scores: list[float]


def first_groups(
    ids: np.ndarray, scores: np.ndarray, keys: Sequence[Hashable | None], k: int, group_size: int
) -> list[Group]:
    """The first ``k`` distinct keys of the ranked ``(ids, scores)``, each with up to ``group_size`` hits."""
    groups: dict[Hashable, Group] = {}
    for item, score, key in zip(ids.tolist(), scores.tolist(), keys):
        if key is None or item < 0:
            continue
        group = groups.get(key)
        if group is None:
            if len(groups) == k:
                continue
            group = groups[key] = Group(key, [], [])
        if len(group.ids) < group_size:
            group.ids.append(item)
            group.scores.append(score)
    return list(groups.values())


def grouped_search(
    search: Callable[[int], tuple[np.ndarray, np.ndarray]],
    key_of: Callable[[np.ndarray], Sequence[Hashable | None]],
    k: int,
    group_size: int,
    total: int,
) -> list[Group]:
    """The best ``k`` groups: ``search(n)`` returns the best ``n`` (ids, scores), ``key_of(ids)`` their keys,
    ``total`` is how many items the index holds."""
    fetch = min(total, k * max(group_size, FETCH_PER_GROUP))
    while True:
        ids, scores = search(fetch)
        groups = first_groups(ids, scores, key_of(ids), k, group_size)
        if len(groups) == k or fetch >= total or len(ids) < fetch:  # fewer than asked: nothing more to find
            return groups
        fetch = min(total, 2 * fetch)
