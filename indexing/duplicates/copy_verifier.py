"""The verification of candidate copy pairs on their pixels: the one check ``retrieval data duplicates``,
``retrieval index duplicates`` (and ``GET /duplicates``) and the benchmark run after the embedding's.

The embedding's threshold finds the candidates; an ImageNet embedding also puts two distinct photos of one
car model above it. A pair is kept when its images' pixel signatures (``data.copy_signature``) correlate
at or above the model's measured pixel threshold (``model.json`` ``duplicates.pixel_threshold``, measured
on the same synthetic copies as the embedding's). A pair whose image cannot be read (a gallery item added
by vector has no path; a file moved away) cannot be checked: the embedding alone decides it, and it is
counted as unverified. Each image is decoded once (a JPEG at a small draft scale), on a few threads; the
signatures of the images in candidate pairs are kept in float16 (6 KB each).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from retrieval.indexing.duplicates.copy_join import CopyPairs
from retrieval.indexing.duplicates.copy_signature import path_signature, signature_similarity

PAIR_CHUNK = 50_000
"""Candidate pairs checked per round (their images' signatures, at most 2 x this many, are held meanwhile)."""
PathOf = Callable[[np.ndarray], Sequence[Path | None]]
"""Row numbers -> their images' paths (None where an item has none)."""


@dataclass(frozen=True)
class VerifiedPairs:
    """The candidate pairs kept (``pairs``), how many were checked on their pixels and how many were kept
    unchecked because an image of theirs could not be read."""

    pairs: CopyPairs
    checked: int
    unverified: int

    def summary(self) -> str:
        dropped = self.checked - (len(self.pairs) - self.unverified)
        text = f"pixel check: {dropped} of {self.checked} candidate pairs dropped as look-alikes, not copies"
        return text + (f"; {self.unverified} pairs unchecked (an image unreadable)" if self.unverified else "")


def verify_copies(
    candidates: CopyPairs, paths: Sequence[Path | None] | PathOf, threshold: float, *, progress: bool = False
) -> VerifiedPairs:
    """The ``candidates`` whose images' pixel signatures correlate at or above ``threshold`` (or cannot be
    read); ``paths`` gives each row's image path, as a sequence or a function of row numbers. The pairs are
    checked ``PAIR_CHUNK`` at a time, so at most the signatures of one chunk's images are held."""
    keep = np.zeros(len(candidates), bool)
    unreadable = np.zeros(len(candidates), bool)
    for start in range(0, len(candidates), PAIR_CHUNK):
        first, second = candidates.first[start : start + PAIR_CHUNK], candidates.second[start : start + PAIR_CHUNK]
        signatures = _signatures(np.unique(np.concatenate([first, second])), paths, progress)
        for i, (a, b) in enumerate(zip(first.tolist(), second.tolist()), start):
            one, other = signatures[a], signatures[b]
            if one is None or other is None:
                unreadable[i] = keep[i] = True
            else:
                keep[i] = signature_similarity(one.astype(np.float32), other.astype(np.float32)) >= threshold
    kept = CopyPairs(candidates.first[keep], candidates.second[keep], candidates.score[keep])
    return VerifiedPairs(kept, int(len(candidates) - unreadable.sum()), int(unreadable.sum()))


def _signatures(
    rows: np.ndarray, paths: Sequence[Path | None] | PathOf, progress: bool
) -> dict[int, np.ndarray | None]:
    """Each row's signature in float16 (None: no path, or unreadable), read on a few threads."""
    located = paths(rows) if callable(paths) else [paths[row] for row in rows.tolist()]
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        read = pool.map(lambda path: None if path is None else path_signature(path), located)
        found = list(tqdm(read, total=len(rows), desc="pixel check", unit="image", disable=not progress))
    return {row: None if s is None else s.astype(np.float16) for row, s in zip(rows.tolist(), found)}
