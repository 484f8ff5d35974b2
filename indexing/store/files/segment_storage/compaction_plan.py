"""When and what to compact: the plan that the policy stored in ``manifest.json`` gives.

Two kinds of compaction, both one generation of the usual protocol (``index_store``); the policy
(``CompactionPolicy``) lives in ``shared.compaction``, beside the manifest that stores it:
* **major**: the base, every delta and no tombstone become one new base, indexed with the manifest's
  kinds (IVF and PQ are trained again on the live items). O(items); ``retrieval index compact`` runs
  it, and an update runs it when the deltas hold more than ``max_delta_fraction`` of the base's rows
  or the tombstones exceed ``max_tombstone_fraction`` of the stored rows (each at least ``min_rows``,
  so small indexes are not rewritten for every few items).
* **minor**: with more than ``max_delta_segments`` deltas, the smallest deltas are merged into one
  new delta (flat, no training; O(their rows)), so searches visit few segments while adds of one
  item stay cheap. An item is rewritten by minor merges about log(adds) times, as in size-tiered
  merging (Lucene, Milvus).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy


@dataclass(frozen=True)
class SegmentSize:
    """What the policy looks at in one segment: its stored rows and how many of them are tombstones."""

    stored: int
    dead: int

    @property
    def live(self) -> int:
        return self.stored - self.dead


@dataclass(frozen=True)
class CompactionPlan:
    """Merge the segments at ``positions`` (0 is the base) into a new base (``major``) or a new delta."""

    positions: tuple[int, ...]
    major: bool


def plan_compaction(policy: CompactionPolicy, sizes: Sequence[SegmentSize]) -> CompactionPlan | None:
    """What an update should compact now (``sizes[0]`` is the base), or None."""
    base, deltas = sizes[0], sizes[1:]
    delta_rows = sum(size.stored for size in deltas)
    dead = sum(size.dead for size in sizes)
    stored = sum(size.stored for size in sizes)
    too_many_deltas = delta_rows >= policy.min_rows and delta_rows > policy.max_delta_fraction * base.live
    too_many_dead = dead >= policy.min_rows and dead > policy.max_tombstone_fraction * stored
    if too_many_deltas or too_many_dead:
        return major_plan(len(sizes))
    if len(deltas) <= policy.max_delta_segments:
        return None
    merged = len(deltas) - policy.max_delta_segments // 2  # at least 2: later adds wait longer for the next
    smallest = sorted(range(1, len(sizes)), key=lambda position: (sizes[position].live, position))[:merged]
    return CompactionPlan(tuple(sorted(smallest)), major=False)


def major_plan(segments: int) -> CompactionPlan:
    return CompactionPlan(tuple(range(segments)), major=True)
