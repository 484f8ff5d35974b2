"""``retrieval eval``'s options, one alias each, so its signature is one line per option."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

EvalModelOpt = Annotated[Path | None, typer.Option("--model", help="export dir or training run dir (with --data)")]
EvalDataOpt = Annotated[Path | None, typer.Option("--data", help="dataset to embed and evaluate (with --model)")]
EvalIndexOpt = Annotated[Path | None, typer.Option("--index", help="evaluate an index directory as built")]
EvalSplitOpt = Annotated[str, typer.Option("--split", help="all, train, val or test (with --data)")]
EvalOutOpt = Annotated[Path | None, typer.Option("--out", help="output directory (default ./eval-<timestamp>)")]
KsOpt = Annotated[str | None, typer.Option("--ks", help="Recall@K list, e.g. 1,2,4,8 (default by dataset)")]
GridOpt = Annotated[int, typer.Option("--grid", min=0, help="queries in retrieval_grid.png (0: none)")]
EvalBatchOpt = Annotated[int, typer.Option("--batch-size", min=1)]
EvalThreadsOpt = Annotated[int | None, typer.Option("--threads", help="onnxruntime threads")]
NeighboursOpt = Annotated[
    Path | None,
    typer.Option("--neighbours", help="also write each query's top results to FILE.parquet or FILE.csv"),
]
NeighboursKOpt = Annotated[int, typer.Option("--neighbours-k", min=1, help="results per query in --neighbours")]
ReferenceOpt = Annotated[
    bool,
    typer.Option(
        "--reference/--no-reference",
        help="with --model: also measure the backbone it was trained from (pooled features; needs torch)",
    ),
]
PostprocessOpt = Annotated[
    str | None,
    typer.Option(
        "--postprocess",
        help="also measure these post-processings beside the raw row: none,qe,dba,dba+qe,kreciprocal",
    ),
]
PostprocessParamsOpt = Annotated[
    str | None,
    typer.Option(
        "--postprocess-params",
        help='their parameters: JSON or a JSON file, e.g. {"qe": {"n": 5, "alpha": 3}} (default: the papers\')',
    ),
]
PromptOpt = Annotated[
    str,
    typer.Option(
        "--prompt",
        help="a model with a text tower (CLIP/SigLIP): the text query of each class for the text->image column; "
        "{label} is its folder name as words (001.Black_footed_Albatross: black footed albatross)",
    ),
]
