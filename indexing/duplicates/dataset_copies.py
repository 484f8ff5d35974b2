"""Copies in a dataset: the pairs, their counts (within a class, across classes, across the class-disjoint
split) and what to leave out, written as ``duplicates.csv``, ``duplicates.png`` and an exclusion list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrieval.indexing.common.atomic_write import atomic_write_bytes
from retrieval.indexing.common.table_files import csv_text
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.duplicates.copy_groups import copy_groups
from retrieval.indexing.duplicates.copy_thresholds import CopyThresholds
from retrieval.indexing.eval.retrieval_grid import GridRow, save_grid


def file_name_bytes(text: str) -> bytes:
    """UTF-8, with a file name that is not UTF-8 written as its own bytes (Python reads such a name into
    surrogates, ``os.fsdecode``): the written path is the file's, byte for byte, so ``--exclude`` finds it."""
    return text.encode("utf-8", "surrogateescape")


CSV_NAME = "duplicates.csv"
GRID_NAME = "duplicates.png"
GRID_PAIRS = 24
PAIR_CAPTION = "image"
"""The first cell of each row of duplicates.png: an image (not a query), its copy beside it."""
EXACT, NEAR = "exact", "near"
KEEP_FIRST = {"train": 0, "val": 1, "test": 2}
"""Which member of a group of copies is kept: one in the training split before the others."""


@dataclass(frozen=True)
class CopyPair:
    """Two records (positions ``a < b`` in the dataset) that are copies, how alike, and their splits."""

    a: int
    b: int
    score: float
    kind: str
    split_a: str
    split_b: str


@dataclass(frozen=True)
class CopyCounts:
    within_class: int
    across_classes: int
    across_split: int

    def phrase(self) -> str:
        return (
            f"{self.within_class} within a class, {self.across_classes} across classes (possible label noise), "
            f"{self.across_split} across the class-disjoint split (a leak)"
        )


@dataclass(frozen=True)
class DatasetCopies:
    """The copies ``retrieval data duplicates`` found among ``records``."""

    records: list[ImageRecord]
    pairs: list[CopyPair]
    thresholds: CopyThresholds | None  # None: exact copies only
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    checked: str = ""  # what the pixel check of the near candidates dropped, in words ("": no check)

    def counts(self, kind: str) -> CopyCounts:
        pairs = [pair for pair in self.pairs if pair.kind == kind]
        across = [pair for pair in pairs if self._label(pair.a) != self._label(pair.b)]
        leaks = sum(pair.split_a != pair.split_b for pair in pairs)
        return CopyCounts(len(pairs) - len(across), len(across), leaks)

    def summary(self) -> str:
        """The counts in two lines (one without near copies), as the commands print them."""
        exact = f"{len(self.records)} images: exact copy pairs (the same pixels): {self.counts(EXACT).phrase()}"
        if self.thresholds is None:
            return exact
        near = f"{exact};\n  near copy pairs: {self.counts(NEAR).phrase()}"
        return near + (f"\n  ({self.checked})" if self.checked else "")

    def excluded(self) -> list[Path]:
        """All but one image of every group of copies (the kept one: in the training split if one is, else
        the first by path), so that no copy stays in the data."""
        split = {pair.a: pair.split_a for pair in self.pairs} | {pair.b: pair.split_b for pair in self.pairs}
        first = np.array([pair.a for pair in self.pairs], np.int64)
        second = np.array([pair.b for pair in self.pairs], np.int64)
        left_out = []
        for group in copy_groups(first, second, len(self.records)):
            members = sorted(group.tolist(), key=lambda i: (KEEP_FIRST.get(split[i], 3), str(self.records[i].path)))
            left_out += [self.records[i].path for i in members[1:]]
        return sorted(left_out)

    def write(self, out_dir: Path, exclude_list: Path | None = None) -> list[Path]:
        """``duplicates.csv`` and ``duplicates.png`` in ``out_dir`` (and ``exclude_list``); the files written."""
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out_dir / CSV_NAME, file_name_bytes(csv_text(self._columns())))
        written = [out_dir / CSV_NAME]
        if self.pairs:
            written.append(save_grid(self._grid_rows(), out_dir / GRID_NAME))
        if exclude_list is not None:
            atomic_write_bytes(exclude_list, file_name_bytes("".join(f"{path}\n" for path in self.excluded())))
            written.append(exclude_list)
        return written

    def _label(self, position: int) -> str:
        return self.records[position].label

    def _columns(self) -> dict[str, Sequence[object]]:
        path, label = (lambda i: str(self.records[i].path)), self._label
        return {
            "path_a": [path(pair.a) for pair in self.pairs],
            "path_b": [path(pair.b) for pair in self.pairs],
            "score": [round(pair.score, 6) for pair in self.pairs],
            "kind": [pair.kind for pair in self.pairs],
            "class_a": [label(pair.a) for pair in self.pairs],
            "class_b": [label(pair.b) for pair in self.pairs],
            "split_a": [pair.split_a for pair in self.pairs],
            "split_b": [pair.split_b for pair in self.pairs],
        }

    def _grid_rows(self) -> list[GridRow]:
        """The pairs that matter most first: across the split, across classes, then by score."""
        ranked = sorted(
            self.pairs,
            key=lambda p: (p.split_a == p.split_b, self._label(p.a) == self._label(p.b), -p.score),
        )
        return [
            GridRow(
                self.records[p.a].path,
                self._label(p.a),
                [(self.records[p.b].path, self._label(p.b))],
                [p.score],
                query_caption=PAIR_CAPTION,
            )
            for p in ranked[:GRID_PAIRS]
        ]
