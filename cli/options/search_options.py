"""The options of ``retrieval search``, declared once (its signature then reads one line per option)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ImagesArg = Annotated[list[Path] | None, typer.Argument(help="query images (embedded in batches)")]
IdOpt = Annotated[list[int] | None, typer.Option("--id", help="search by a stored item, itself left out (repeatable)")]
VectorOpt = Annotated[
    Path | None,
    typer.Option(
        "--vector",
        help="search by the vectors of this .npy file (one vector, or one per row), made with the index's model",
    ),
]
TextOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--text",
        help="search by words, e.g. --text 'red pickup truck' (repeatable), with the text tower of the index's "
        "model (a CLIP or SigLIP export)",
    ),
]
KOpt = Annotated[int, typer.Option("-k", "--k", min=1, help="number of results per query")]
KindOpt = Annotated[
    str | None,
    typer.Option("--kind", help="the index searched: float (exact cosine, the default) or binary (Hamming)"),
]
BinaryOpt = Annotated[bool, typer.Option("--binary", help="the older spelling of --kind binary")]
RerankOpt = Annotated[
    int | None, typer.Option("--rerank", min=1, help="with --kind binary: a shortlist this long re-ranked by float")
]
FilterOpt = Annotated[
    str | None,
    typer.Option(
        "--filter",
        help='only items that match this JSON filter (docs/serving.md, "Filters"): "label" is the label, other '
        "keys metadata; a value means equal, an object holds operators $in, $ne, $gt, $gte, $lt, $lte, $exists; "
        'all must match, e.g. \'{"label": {"$in": ["cat", "dog"]}, "price": {"$lt": 50}}\'',
    ),
]
OffsetOpt = Annotated[int, typer.Option("--offset", min=0, help="skip this many of the best hits (paging)")]
MinScoreOpt = Annotated[
    float | None,
    typer.Option("--min-score", help="only hits scoring at least this (-1..1); how many were cut is said on stderr"),
]
MinProbabilityOpt = Annotated[
    float | None,
    typer.Option(
        "--min-probability",
        help="only hits whose calibrated probability of sharing the query's class is at least this (0..1; "
        "the model's calibration, refused without one); how many were cut is said on stderr",
    ),
]
CutoffOpt = Annotated[
    str,
    typer.Option(
        "--cutoff",
        help="auto: per query, keep the first hits its own calibrated probabilities mark as worth keeping "
        "(the count that maximises their expected F1; --min-probability its floor); none: keep all k",
    ),
]
CollapseOpt = Annotated[
    bool,
    typer.Option(
        "--collapse-duplicates",
        help="one hit per group of copies (the best ranked), copies by the model's measured copy threshold",
    ),
]
PostprocessOpt = Annotated[
    str,
    typer.Option(
        "--postprocess",
        help="none, qe (alpha-query expansion) or kreciprocal (k-reciprocal re-ranking of the top candidates), "
        "with the parameters in the index's manifest",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="write JSON: every query with its results")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="write CSV: one row per query and rank")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="write to this file (.json or .csv) instead of stdout")]
ModelOpt = Annotated[Path | None, typer.Option("--model", help="query model (default: the index's own copy)")]
ForceOpt = Annotated[bool, typer.Option("--force", help="search even if the model differs from the index's")]
PositiveOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--positive",
        help="search by examples: more like this stored item (ID or KEY; repeatable); the examples are not returned",
    ),
]
NegativeOpt = Annotated[
    list[str] | None,
    typer.Option("--negative", help="with --positive: less like this stored item (ID or KEY; repeatable)"),
]
StrategyOpt = Annotated[
    str | None,
    typer.Option(
        "--strategy",
        help="how examples are searched: average_vector (Qdrant's, the default) or best_score (Qdrant's)",
    ),
]
GroupByOpt = Annotated[
    str | None,
    typer.Option("--group-by", help="the best k groups of items sharing 'label' or this metadata key"),
]
GroupSizeOpt = Annotated[int, typer.Option("--group-size", help="with --group-by: hits per group")]
DiversityOpt = Annotated[
    float | None,
    typer.Option("--diversity", help="0 (the plain order) to 1: MMR's weight of novelty over the first candidates"),
]
