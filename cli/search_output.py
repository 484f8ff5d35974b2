"""What ``retrieval search`` prints: an aligned table for people, JSON or CSV for programs."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval.indexing.common.table_files import csv_text
from retrieval.indexing.usecases.searching import QueryHits, SearchRequest

LABEL_WIDTH = 24
"""Labels are cut (with an ellipsis) only where the terminal has no room for them whole beside the paths,
and never below this width, so the path column stays aligned."""
FIXED_COLUMNS = len("rank  " + " " * 8 + "  " + " " * 7 + "  " + "  ")
SCORE_DIGITS = 6


def fit(text: str, width: int) -> str:
    """``text`` padded to ``width``, or cut to it with a trailing ellipsis."""
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def table_text(queries: Sequence[QueryHits], columns: int | None = None, offset: int = 0) -> str:
    """One table per query (headed by the query when there are several), as wide as ``columns`` (None: the
    terminal's width) allows; ranks count from ``offset + 1``."""
    keys = _key_width(queries)
    calibrated = any(hit.probability is not None for query in queries for hit in query.hits)
    room = (columns or shutil.get_terminal_size().columns) - (keys + 2 if keys else 0) - (12 if calibrated else 0)
    width = _label_width(queries, room)
    blocks = []
    for query in queries:
        lines = [_query_heading(query)] if len(queries) > 1 else []
        key_heading = f"{'key'.ljust(keys)}  " if keys else ""
        same = f"{'same class':>10}  " if calibrated else ""
        lines.append(f"{'rank':>4}  {'id':>8}  {key_heading}{'score':>7}  {same}{fit('label', width)}  path")
        for rank, hit in enumerate(query.hits, start=offset + 1):
            item = hit.item
            key = f"{(item.key or '-').ljust(keys)}  " if keys else ""
            chance = f"{percent_text(hit.probability):>10}  " if calibrated else ""
            lines.append(
                f"{rank:>4}  {item.id:>8}  {key}{hit.score:>7.4f}  {chance}{fit(item.label, width)}  {item.path}"
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def percent_text(probability: float | None) -> str:
    """``93 %`` (``<1 %`` and ``>99 %`` at the ends), or ``-`` where a hit has no probability."""
    if probability is None:
        return "-"
    if probability < 0.005:
        return "<1 %"
    return ">99 %" if probability > 0.995 else f"{probability * 100:.0f} %"


def _key_width(queries: Sequence[QueryHits]) -> int:
    """The key column's width: the longest key of the hits, 0 (no column) where no hit has a key."""
    keys = [len(item.key) for query in queries for item, _ in query.hits if item.key is not None]
    return max([len("key"), *keys]) if keys else 0


def _label_width(queries: Sequence[QueryHits], columns: int) -> int:
    """The longest label, or what the terminal leaves beside the longest path (at least ``LABEL_WIDTH``)."""
    hits = [item for query in queries for item, _ in query.hits]
    longest = max([len("label")] + [len(item.label) for item in hits])
    room = columns - FIXED_COLUMNS - max([len("path")] + [len(str(item.path)) for item in hits])
    return min(longest, max(room, LABEL_WIDTH))


def _query_heading(query: QueryHits) -> str:
    return f"query: item {query.item_id} ({query.path})" if query.item_id is not None else f"query: {query.path}"


def json_document(
    queries: Sequence[QueryHits], request: SearchRequest, unreadable: Sequence[tuple[Path, str]] = ()
) -> dict[str, Any]:
    """Every query with its results (rank, id, key, score, label, path, metadata), plus the search settings."""
    settings = request.settings
    return {
        "index": str(request.index_dir),
        "k": settings.k,
        "index_kind": settings.kind,
        "rerank": settings.rerank,
        "score_kind": settings.score_kind,
        "postprocess": settings.postprocess,
        "filter": settings.where.to_json() if settings.where is not None else None,
        "offset": settings.offset,
        "min_score": settings.min_score,
        "min_probability": settings.min_probability,
        "cutoff": settings.cutoff,
        "queries": [
            {
                "query": query.path,
                "query_id": query.item_id,
                "below_min_score": query.below_min_score,
                "below_min_probability": query.below_min_probability,
                "results": [
                    {
                        "rank": rank,
                        "id": hit.item.id,
                        "key": hit.item.key,
                        "score": round(hit.score, SCORE_DIGITS),
                        "probability": _rounded(hit.probability),
                        "label": hit.item.label,
                        "path": hit.item.path,
                        "metadata": hit.item.metadata,
                    }
                    for rank, hit in enumerate(query.hits, start=settings.offset + 1)
                ],
            }
            for query in queries
        ],
        "unreadable": [{"path": str(path), "reason": reason} for path, reason in unreadable],
    }


def csv_document(queries: Sequence[QueryHits], offset: int = 0) -> str:
    """One row per (query, rank): query, query_id, rank (from ``offset + 1``), id, key, score, probability
    (empty without calibration), label, path."""
    rows = [(query, rank, hit.item, hit) for query in queries for rank, hit in enumerate(query.hits, offset + 1)]
    return csv_text(
        {
            "query": [query.path for query, *_ in rows],
            "query_id": [query.item_id for query, *_ in rows],
            "rank": [rank for _, rank, _, _ in rows],
            "id": [item.id for _, _, item, _ in rows],
            "key": [item.key or "" for _, _, item, _ in rows],
            "score": [round(hit.score, SCORE_DIGITS) for *_, hit in rows],
            "probability": [_rounded(hit.probability) for *_, hit in rows],
            "label": [item.label for _, _, item, _ in rows],
            "path": [item.path for _, _, item, _ in rows],
        }
    )


def _rounded(probability: float | None) -> float | None:
    return round(probability, SCORE_DIGITS) if probability is not None else None
