"""``retrieval index build --shard I/N`` and ``retrieval index merge OUT SHARD...``: a gallery embedded
by N independent jobs (Kubernetes Indexed Job, Slurm array, shell loop), merged into one index."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.options.backend_options import BackendOpt, CollectionOpt, MilvusUriOpt
from retrieval.indexing import usecases as api
from retrieval.indexing.usecases import ShardReport


def echo_shard_report(report: ShardReport, out: Path) -> None:
    """What ``index build --shard I/N`` did: the shard's images, where, how fast, and the next step."""
    spec = report.spec
    rate = report.count / report.embed_seconds if report.embed_seconds > 0 else 0.0
    typer.echo(
        f"shard {spec}: embedded {report.count} of {report.listing_size} images into {out} "
        f"(model {report.model_sha256[:12]}) in {report.embed_seconds:.1f} s ({rate:.1f} images/s)"
    )
    typer.echo(f"next, once all {spec.count} shards are built: retrieval index merge INDEX_DIR SHARD_DIR...")


def merge(
    out: Annotated[Path, typer.Argument(help="index directory to create (or replace)")],
    shards: Annotated[list[Path], typer.Argument(help="the N shard directories of `index build --shard I/N`")],
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress bars (for logs and scripts)")] = False,
    backend: BackendOpt = "files",
    milvus_uri: MilvusUriOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """Merge the N shard directories of `retrieval index build --shard I/N` into one index directory.

    With --backend milvus the shards' items are bulk-inserted into a Milvus collection instead, with
    the same ids, and OUT names it (as `index build --backend milvus` does).

    The result equals one unsharded `index build` of the same data: the same items with the same
    ids, the same vectors, the same search results. Shards of different models, listings, shard
    counts or kinds, and duplicated or missing shards are refused before anything is written.
    """
    report = api.merge_index(
        out, shards, backend=backend, milvus_uri=milvus_uri, collection=collection, progress=not quiet
    )
    typer.echo(
        f"merged {report.shards} shards: {report.count} images of {report.num_labels} classes into "
        f"{report.index_dir} ({report.storage}, model "
        f"{report.model_sha256[:12]}; {report.failures} unreadable images skipped) in {report.seconds:.1f} s"
    )
    typer.echo(f"next: retrieval eval --index {out}   (or: retrieval serve --index {out})")


def register(app: typer.Typer) -> None:
    """Add ``merge`` to the ``index`` group."""
    app.command("merge")(merge)
