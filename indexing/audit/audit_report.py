"""What an audit found, as the files and the summary the doors show: ``label_issues.csv`` (every item, most
suspect first), ``outliers.csv``, ``audit.json`` (counts, copies, image-quality flags), ``audit.png`` (the top
suspects beside their nearest neighbours of the given and the suggested class), the exclusion list for
``retrieval train --exclude`` and ``relabel.csv`` for ``retrieval data apply-relabel``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexing.audit.audit_scores import AuditScores
from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.table_files import write_table
from retrieval.indexing.eval.retrieval_grid import GridRow, save_grid
from retrieval.indexing.search.results import PAD_ID

LABEL_ISSUES = "label_issues.csv"
OUTLIERS = "outliers.csv"
SUMMARY = "audit.json"
FIGURE = "audit.png"
RELABEL = "relabel.csv"
SUSPECT_SCORE = 0.98
"""A label score at or above it counts as a suspect: the given class holds under 2 % of the evidence."""
SUSPECT_PRECISION = "0.94-0.96 on cub50, 0.20-0.33 on cars196 (whose car models the pretrained model mixes up)"
"""The share of suspects that were planted flips (5 %) on the training classes, with EfficientNet-Lite0's ImageNet
features (docs/results.md): it depends on how well the model tells the classes apart."""
OUTLIER_SHARE = 0.01
"""The share of items ``outliers.csv`` calls outliers in the summary (the file lists every item)."""
FIGURE_ROWS = 16
FIGURE_NEIGHBOURS = 3


@dataclass(frozen=True)
class AuditReport:
    """An audit of ``names`` (paths, or keys when ``name_column`` is ``key``) by their ``scores``."""

    names: list[str]
    name_column: str
    scores: AuditScores
    facts: dict[str, Any] = field(default_factory=dict)  # copies and image-quality flags, when images were read
    images: bool = False  # names are image paths (a figure can be drawn)
    ids: list[int] | None = None  # a gallery's item ids (``GET /audit`` rows carry them; the CSV files do not)

    def label_order(self) -> np.ndarray:
        return np.lexsort((np.arange(len(self.names)), -self.scores.label_scores))

    def label_rows(self) -> list[dict[str, Any]]:
        """Every item, most suspect first: name, label, suggested_label, score (and ``id``, a gallery's)."""
        classes, scores = self.scores.classes, self.scores
        return [
            {
                **({"id": self.ids[i]} if self.ids is not None else {}),
                self.name_column: self.names[i],
                "label": classes[scores.labels[i]],
                "suggested_label": scores.suggested_name(i),
                "score": round(float(scores.label_scores[i]), 6),
            }
            for i in self.label_order()
        ]

    def outlier_rows(self) -> list[dict[str, Any]]:
        order = np.lexsort((np.arange(len(self.names)), -self.scores.outlier_scores))
        return [
            {
                self.name_column: self.names[i],
                "label": self.scores.classes[self.scores.labels[i]],
                "score": round(float(self.scores.outlier_scores[i]), 6),
            }
            for i in order
        ]

    def suspects(self) -> list[str]:
        return [self.names[i] for i in self.label_order() if self.scores.label_scores[i] >= SUSPECT_SCORE]

    def counts(self) -> dict[str, Any]:
        return {
            "items": len(self.names),
            "classes": len(self.scores.classes),
            "suspects": len(self.suspects()),
            "suspect_score": SUSPECT_SCORE,
            "suspect_precision_measured": SUSPECT_PRECISION,
            "outliers": max(1, round(OUTLIER_SHARE * len(self.names))) if self.names else 0,
        }

    def summary(self) -> str:
        counts = self.counts()
        lines = [
            f"{counts['items']} items of {counts['classes']} classes: {counts['suspects']} probably mislabelled "
            f"(label score >= {SUSPECT_SCORE}; of such items on 5 % planted flips, {SUSPECT_PRECISION} were mislabelled)",
        ]
        lines += [
            f"  {row[self.name_column]}: {row['label']} -> {row['suggested_label']} ({row['score']:.2f})"
            for row in self.label_rows()[:5]
            if row["score"] >= SUSPECT_SCORE
        ]
        lines += [f"{key}: {value}" for key, value in self.facts.items()]
        return "\n".join(lines)

    def write(self, out: Path, exclude_list: Path | None = None) -> list[Path]:
        """The audit's files in ``out`` (and ``exclude_list``: the suspects, one a line); the files written."""
        out.mkdir(parents=True, exist_ok=True)
        written = [out / LABEL_ISSUES, out / OUTLIERS, out / RELABEL, out / SUMMARY]
        write_table(
            out / LABEL_ISSUES, _columns(self.label_rows(), [self.name_column, "label", "suggested_label", "score"])
        )
        write_table(out / OUTLIERS, _columns(self.outlier_rows(), [self.name_column, "label", "score"]))
        write_table(out / RELABEL, self._relabel_columns())
        atomic_write_text(out / SUMMARY, json.dumps({**self.counts(), **self.facts}, indent=2) + "\n")
        if self.images and self.names:
            written.append(save_grid(self.figure_rows(), out / FIGURE))
        if exclude_list is not None:
            atomic_write_text(exclude_list, "".join(f"{name}\n" for name in self.suspects()))
            written.append(exclude_list)
        return written

    def _relabel_columns(self) -> dict[str, list[str]]:
        """The suspects with ``new_label`` set to the suggestion: a user edits it (empty: keep the label)."""
        rows = [row for row in self.label_rows() if row["score"] >= SUSPECT_SCORE]
        return {
            self.name_column: [row[self.name_column] for row in rows],
            "label": [row["label"] for row in rows],
            "new_label": [row["suggested_label"] for row in rows],
        }

    def figure_rows(self) -> list[GridRow]:
        """Each top suspect beside its nearest neighbours of its given class, then of the suggested class."""
        rows = []
        for i in self.label_order()[:FIGURE_ROWS]:
            given, suggested = self.scores.labels[i], self.scores.suggested[i]
            picked = [*self._nearest_of(i, given), *self._nearest_of(i, suggested)]
            label = self.scores.classes[given]
            rows.append(
                GridRow(
                    Path(self.names[i]),
                    label,
                    [(Path(self.names[j]), self.scores.classes[self.scores.labels[j]]) for j in picked],
                )
            )
        return rows

    def _nearest_of(self, item: int, label: int) -> list[int]:
        ids = self.scores.neighbours.ids[item]
        return [int(j) for j in ids if j != PAD_ID and self.scores.labels[j] == label][:FIGURE_NEIGHBOURS]


def _columns(rows: list[dict[str, Any]], names: list[str]) -> dict[str, list[Any]]:
    return {name: [row[name] for row in rows] for name in names}


def page(rows: list[dict[str, Any]], offset: int, limit: int) -> list[dict[str, Any]]:
    """Rows ``offset`` to ``offset + limit``; a DataError for a negative offset or a limit below 1."""
    if offset < 0 or limit < 1:
        raise DataError(f"offset must be >= 0 and limit >= 1, got offset {offset} and limit {limit}")
    return rows[offset : offset + limit]
