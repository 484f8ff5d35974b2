"""Each query's ranked neighbours as table columns (``retrieval eval --neighbours FILE``).

One row per (query, rank): the query's path and label, the neighbour's path and label, the
cosine score (inner product of the L2-normalised float embeddings) and whether the labels
match; item ids as well when the evaluation read an index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.indexing.eval.evaluation import EvalData

SCORE_DIGITS = 6


def neighbour_columns(data: EvalData, queries: np.ndarray, neighbours: np.ndarray) -> dict[str, list[Any]]:
    """Columns for ``write_table``: ``neighbours[i]`` holds the ranked positions (-1 pads) of query
    position ``queries[i]`` in ``data``."""
    rows = [(q, rank, n) for q, row in zip(queries, neighbours) for rank, n in enumerate(row, 1) if n >= 0]
    query_pos = np.array([q for q, _, _ in rows], dtype=np.int64)
    found_pos = np.array([n for _, _, n in rows], dtype=np.int64)
    scores = np.einsum("ij,ij->i", data.embeddings[query_pos], data.embeddings[found_pos]) if rows else []
    columns: dict[str, list[Any]] = {}
    if data.ids is not None:
        columns["query_id"] = data.ids[query_pos].tolist()
    columns["query_path"] = [data.paths[q] for q in query_pos]
    columns["query_label"] = data.labels[query_pos].tolist()
    columns["rank"] = [rank for _, rank, _ in rows]
    if data.ids is not None:
        columns["neighbour_id"] = data.ids[found_pos].tolist()
    columns["neighbour_path"] = [data.paths[n] for n in found_pos]
    columns["neighbour_label"] = data.labels[found_pos].tolist()
    columns["score"] = [round(float(score), SCORE_DIGITS) for score in scores]
    columns["correct"] = (data.labels[query_pos] == data.labels[found_pos]).tolist()
    return columns
