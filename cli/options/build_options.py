"""``retrieval index build``'s own options, one alias each (those other index commands share: ``index_options``,
``backend_options``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.indexing import usecases as api

BuildOutOpt = Annotated[Path, typer.Option("--out", help="index directory to create (or replace)")]
BuildModelOpt = Annotated[Path | None, typer.Option("--model", help="export dir (model.onnx + model.json) or run dir")]
BuildDataOpt = Annotated[
    Path | None, typer.Option("--data", help="dataset folder / CSV (any layout `retrieval data` reads)")
]
VectorsOpt = Annotated[
    Path | None,
    typer.Option("--vectors", help="EMB.npy: index these vectors alone, without --model/--data (no model)"),
]
ItemsOpt = Annotated[
    Path | None,
    typer.Option("--items", help="ITEMS.csv of --vectors: key, label, metadata columns (default EMB.items.csv)"),
]
FloatKindOpt = Annotated[str, typer.Option("--float-kind", help=f"one of {', '.join(api.FLOAT_KINDS)}")]
BinaryKindOpt = Annotated[str, typer.Option("--binary-kind", help=f"one of {', '.join(api.BINARY_KINDS)}")]
BuildSplitOpt = Annotated[str, typer.Option("--split", help="all, train, val or test")]
