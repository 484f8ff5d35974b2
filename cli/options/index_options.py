"""Options that several index commands share (``index``, ``search``, ``embed``, ``eval``, ``data``),
declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

IndexArg = Annotated[Path, typer.Argument(help="index directory")]
ModelOpt = Annotated[Path, typer.Option("--model", help="export dir (model.onnx + model.json) or training run dir")]
DataOpt = Annotated[Path, typer.Option("--data", help="dataset folder / CSV (any layout `retrieval data` reads)")]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", help="onnxruntime intra-op threads (default: all cores)")]
BatchOpt = Annotated[int, typer.Option("--batch-size", min=1, help="images per inference batch")]
QuietOpt = Annotated[bool, typer.Option("--quiet", help="no progress bars (for logs and scripts)")]
DbaOpt = Annotated[
    int | None,
    typer.Option(
        "--dba",
        min=1,
        help="database-side augmentation: store every vector as the weighted sum of itself and its top N neighbours",
    ),
]
ThresholdOpt = Annotated[
    float | None,
    typer.Option(
        "--threshold",
        help="Cosine similarity in [-1, 1] above which two images are copies. [default: the one the model's "
        "model.json measured on synthetic copies]",
        show_default=False,
    ),
]
ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard",
        help="I/N: embed only shard I of N (from 0; stable by path) into --out, a shard directory for "
        "`retrieval index merge`",
    ),
]
ServedParamsOpt = Annotated[
    str | None,
    typer.Option(
        "--postprocess-params",
        help="JSON or a JSON file: the parameters of qe, kreciprocal and dba (alpha) this index serves with",
    ),
]
KeysOpt = Annotated[
    Path | None,
    typer.Option(
        "--keys",
        help="CSV file with the columns path,key: each listed image's own id (unique per index); a CSV "
        "manifest's key column does the same",
    ),
]
PixelCheckOpt = Annotated[
    bool,
    typer.Option(
        "--pixel-check/--no-pixel-check",
        help="Keep only the pairs whose images' pixels agree at the model's measured pixel threshold (drops "
        "look-alikes that are not copies); --no-pixel-check keeps every pair above the embedding threshold.",
    ),
]
