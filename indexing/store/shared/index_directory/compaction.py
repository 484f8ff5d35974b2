"""What every store says about compaction: the policy ``manifest.json`` keeps and what a compaction did.

The files backend compacts its segments (``files.compaction_plan`` decides when and what); a Milvus
collection compacts itself, so ``MilvusStore.compact`` refuses. The policy is part of the manifest
of either backend, so it lives here, beside ``manifest``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class CompactionPolicy(BaseModel):
    """The thresholds of automatic compaction (``manifest.json``'s ``compaction``)."""

    model_config = ConfigDict(extra="forbid")

    max_delta_segments: int = Field(8, ge=1, description="more deltas than this: merge the smallest ones")
    max_delta_fraction: float = Field(0.25, ge=0, description="delta rows above this share of base rows: major")
    max_tombstone_fraction: float = Field(0.2, ge=0, description="tombstones above this share of rows: major")
    min_rows: int = Field(
        1000, ge=0, description="an automatic major compaction needs this many delta rows or tombstones"
    )


@dataclass(frozen=True)
class CompactionResult:
    """What ``compact`` did: segments and tombstones before and after, and how long it took."""

    segments_before: int
    tombstones_before: int
    segments_after: int
    tombstones_after: int
    seconds: float
