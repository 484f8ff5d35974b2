"""``retrieval embed``: a dataset's (or an index's) embeddings as Parquet or .npy, with ids, paths and labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.index_commands import BatchOpt, QuietOpt, ThreadsOpt, echo_failures
from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.model.embedding_files import (
    EmbeddingTable,
    check_embedding_path,
    embedding_table,
    write_embedding_table,
)
from retrieval.indexing.model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.model.resolution import resolve_export_dir
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.stored_embeddings import stored_embedding_table


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
    check_embedding_path(out)  # an unknown suffix or a missing pyarrow fails before any image is read
    if (index is None) == (model is None) or (model is None) != (data is None):
        raise ConfigError("pass either --model MODEL --data PATH, or --index INDEX_DIR")
    table = (
        _from_index(index)
        if index is not None
        else _from_dataset(model, data, split, batch_size, threads, progress=not quiet)
    )
    written = write_embedding_table(out, table)
    dim = table.embeddings.shape[1]
    typer.echo(f"wrote {len(table.ids)} embeddings ({dim}-d) to {' and '.join(map(str, written))}")


def _from_dataset(
    model: Path | None, data: Path | None, split: str, batch_size: int, threads: int | None, *, progress: bool
) -> EmbeddingTable:
    """Ids are the images' positions in the split (sorted by label, then path); unreadable ones are skipped."""
    assert model is not None and data is not None  # checked by the caller
    records = select_split(load_records(data), split)
    if not records:
        raise DataError(f"the {split} split of {data} holds no images")
    embedder = OnnxEmbedder(resolve_export_dir(model), threads=threads)
    result = embedding_table(embedder, records, batch_size=batch_size, progress=progress)
    echo_failures(result.failures)
    return result.table


def _from_index(index: Path) -> EmbeddingTable:
    with open_store(index) as store:
        return stored_embedding_table(store)


def register(app: typer.Typer) -> None:
    """Add ``embed`` to the top-level app."""
    app.command("embed")(embed)
