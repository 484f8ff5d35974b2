"""``retrieval embed``: a dataset's (or an index's) embeddings as Parquet or .npy, with ids, paths and labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.commands.index_commands import echo_failures
from retrieval.cli.options.index_options import BatchOpt, QuietOpt, ThreadsOpt
from retrieval.indexing import usecases as api


def embed(
    out: Annotated[
        Path, typer.Option("--out", help="FILE.parquet, or FILE.npy (+ FILE.items.csv with ids, paths, labels)")
    ],
    model: Annotated[Path | None, typer.Option("--model", help="export dir or training run dir (with --data)")] = None,
    data: Annotated[Path | None, typer.Option("--data", help="dataset folder / CSV to embed (with --model)")] = None,
    index: Annotated[
        Path | None, typer.Option("--index", help="write an index's stored embeddings with their item ids instead")
    ] = None,
    split: Annotated[str, typer.Option("--split", help="all, train, val or test (with --data)")] = "all",
    batch_size: BatchOpt = 32,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Embed a dataset with an exported model (or read an index) and write the embeddings with their items."""
    api.check_embedding_path(out)  # an unknown suffix or a missing pyarrow fails before any image is read
    if (index is None) == (model is None) or (model is None) != (data is None):
        raise api.ConfigError("pass either --model MODEL --data PATH, or --index INDEX_DIR")
    if index is not None:
        table = api.index_embeddings(index)
    else:
        assert model is not None and data is not None  # checked above
        result = api.dataset_embeddings(
            model, data, split=split, batch_size=batch_size, threads=threads, progress=not quiet
        )
        echo_failures(result.failures)
        table = result.table
    written = api.write_embedding_table(out, table)
    dim = table.embeddings.shape[1]
    typer.echo(f"wrote {len(table.ids)} embeddings ({dim}-d) to {' and '.join(map(str, written))}")


def register(app: typer.Typer) -> None:
    """Add ``embed`` to the top-level app."""
    app.command("embed")(embed)
