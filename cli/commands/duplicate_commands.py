"""``retrieval data duplicates DATA --out DIR`` and ``retrieval index duplicates INDEX --out FILE.csv``: copies
in a dataset before they inflate a metric, and groups of copies in a gallery before they crowd a result page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.options.index_options import QuietOpt
from retrieval.indexing import usecases as api
from retrieval.indexing.eval.dataset_copies import CSV_NAME, GRID_NAME
from retrieval.indexing.usecases.dataset_duplicates import SplitSettings

ThresholdOpt = Annotated[
    float | None,
    typer.Option(
        "--threshold",
        help="Cosine similarity in [-1, 1] above which two images are copies. [default: the one the model's "
        "model.json measured on synthetic copies]",
        show_default=False,
    ),
]


def data_duplicates(
    data: Annotated[Path, typer.Argument(help="Dataset folder or CSV manifest.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for duplicates.csv and duplicates.png.")],
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="Export or run directory. [default: EfficientNet-Lite0's ImageNet weights, exported once to OUT/model]",
            show_default=False,
        ),
    ] = None,
    threshold: ThresholdOpt = None,
    exclude_list: Annotated[
        Path | None,
        typer.Option(
            "--exclude-list", help="Write the paths to leave out (all but one image of each group) to this file."
        ),
    ] = None,
    val_fraction: Annotated[
        float, typer.Option("--val-fraction", help="The split to check for leaks: as `retrieval train`'s.")
    ] = 0.2,
    val_fold: Annotated[int | None, typer.Option("--val-fold", help="As `retrieval train`'s.")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Find exact copies (the same decoded pixels) and near copies (embeddings above the copy threshold).

    Counts them within a class, across classes (possible label noise) and across the class-disjoint split that
    `retrieval train` makes with the same --val-fraction (a leak that inflates test MAP@R). Writes
    OUT/duplicates.csv (path_a, path_b, score, kind, class_a, class_b, split_a, split_b) and OUT/duplicates.png
    (the pairs side by side, leaks first). `retrieval train --exclude FILE` leaves out what --exclude-list wrote.
    """
    from retrieval.training.usecases import data_duplicates as run  # torch: only this command needs it

    copies = run(
        data,
        out,
        model=model,
        threshold=threshold,
        exclude_list=exclude_list,
        split=SplitSettings(val_fraction=val_fraction, val_fold=val_fold),
        progress=not quiet,
    )
    typer.echo(f"threshold: {copies.thresholds.source if copies.thresholds else '(exact copies only)'}")
    typer.echo(copies.summary())
    for path, reason in copies.unreadable[:10]:
        typer.secho(f"warning: skipped {path}: {reason}", fg=typer.colors.YELLOW, err=True)
    typer.echo(f"wrote {out / CSV_NAME}" + (f" and {out / GRID_NAME}" if copies.pairs else ""))
    if exclude_list is not None:
        typer.echo(
            f"wrote {len(copies.excluded())} paths to leave out to {exclude_list}; "
            f"next: retrieval train --data {data} --exclude {exclude_list} ..."
        )


def index_duplicates(
    index_dir: Annotated[Path, typer.Argument(help="Index directory.")],
    out: Annotated[Path, typer.Option("--out", help="CSV to write: group, size, id, key, path, label.")],
    threshold: ThresholdOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Find the groups of near-duplicate items of an index (connected components of the pairs above the copy
    threshold), largest first, and write them as CSV, one row per item."""
    found = api.find_index_duplicates(index_dir, out, threshold=threshold, progress=not quiet)
    typer.echo(f"threshold: {found.thresholds.source}")
    typer.echo(f"{found.summary()}; wrote {out}")


def register(app: typer.Typer) -> None:
    """Add ``duplicates`` to the ``index`` group."""
    app.command("duplicates")(index_duplicates)
