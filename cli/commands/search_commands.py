"""``retrieval search INDEX IMG [IMG ...] | --id ITEM_ID | --text WORDS``: batched search from the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from retrieval.cli.activity import activity
from retrieval.cli.commands.index_commands import echo_failures
from retrieval.cli.options.index_options import BatchOpt, IndexArg, QuietOpt, ThreadsOpt
from retrieval.cli.search_output import csv_document, json_document, table_text
from retrieval.indexing import usecases as api
from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.search.postprocess_params import QUERY_METHODS, parse_methods
from retrieval.indexing.usecases.vector_input import read_vector_file

Format = Literal["table", "json", "csv"]


def search(
    index_dir: IndexArg,
    images: Annotated[list[Path] | None, typer.Argument(help="query images (embedded in batches)")] = None,
    item_ids: Annotated[
        list[int] | None, typer.Option("--id", help="search by a stored item, itself left out (repeatable)")
    ] = None,
    vector: Annotated[
        Path | None,
        typer.Option(
            "--vector",
            help="search by the vectors of this .npy file (one vector, or one per row), made with the index's model",
        ),
    ] = None,
    texts: Annotated[
        list[str] | None,
        typer.Option(
            "--text",
            help="search by words, e.g. --text 'red pickup truck' (repeatable), with the text tower of the index's "
            "model (a CLIP or SigLIP export)",
        ),
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="number of results per query")] = 10,
    kind: Annotated[
        str | None,
        typer.Option("--kind", help="the index searched: float (exact cosine, the default) or binary (Hamming)"),
    ] = None,
    binary: Annotated[bool, typer.Option("--binary", help="the older spelling of --kind binary")] = False,
    rerank: Annotated[
        int | None, typer.Option("--rerank", min=1, help="with --kind binary: a shortlist this long re-ranked by float")
    ] = None,
    filter_: Annotated[
        str | None,
        typer.Option(
            "--filter",
            help='only items that match this JSON filter (docs/serving.md, "Filters"): "label" is the label, other '
            "keys metadata; a value means equal, an object holds operators $in, $ne, $gt, $gte, $lt, $lte, $exists; "
            'all must match, e.g. \'{"label": {"$in": ["cat", "dog"]}, "price": {"$lt": 50}}\'',
        ),
    ] = None,
    offset: Annotated[int, typer.Option("--offset", min=0, help="skip this many of the best hits (paging)")] = 0,
    min_score: Annotated[
        float | None,
        typer.Option(
            "--min-score", help="only hits scoring at least this (-1..1); how many were cut is said on stderr"
        ),
    ] = None,
    min_probability: Annotated[
        float | None,
        typer.Option(
            "--min-probability",
            help="only hits whose calibrated probability of sharing the query's class is at least this (0..1; "
            "the model's calibration, refused without one); how many were cut is said on stderr",
        ),
    ] = None,
    cutoff: Annotated[
        str,
        typer.Option(
            "--cutoff",
            help="auto: per query, keep the first hits its own calibrated probabilities mark as worth keeping "
            "(the count that maximises their expected F1; --min-probability its floor); none: keep all k",
        ),
    ] = "none",
    collapse_duplicates: Annotated[
        bool,
        typer.Option(
            "--collapse-duplicates",
            help="one hit per group of copies (the best ranked), copies by the model's measured copy threshold",
        ),
    ] = False,
    postprocess: Annotated[
        str,
        typer.Option(
            "--postprocess",
            help="none, qe (alpha-query expansion) or kreciprocal (k-reciprocal re-ranking of the top candidates), "
            "with the parameters in the index's manifest",
        ),
    ] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="write JSON: every query with its results")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="write CSV: one row per query and rank")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="write to this file (.json or .csv) instead of stdout")
    ] = None,
    model: Annotated[Path | None, typer.Option("--model", help="query model (default: the index's own copy)")] = None,
    force: Annotated[bool, typer.Option("--force", help="search even if the model differs from the index's")] = False,
    batch_size: BatchOpt = 32,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Find the items of an index most similar to each query image (or stored item, vector or text) and print them."""
    fmt = _output_format(as_json, as_csv, out)
    if not images and not item_ids and vector is None and not texts:
        raise ConfigError(
            "give one or more query images, --id ITEM_ID to search by a stored item, --vector FILE.npy, or --text WORDS"
        )
    methods = parse_methods(postprocess, QUERY_METHODS)
    if len(methods) > 1:
        raise ConfigError(f"--postprocess takes one of {', '.join(QUERY_METHODS)}, got {postprocess!r}")
    request = api.SearchRequest.of(  # a malformed filter or a threshold outside -1..1 fails before any embedding
        index_dir,
        images or [],
        item_ids or [],
        k=k,
        kind=api.aliased("kind", kind, "--binary", "binary" if binary else None) or "float",
        rerank=rerank,
        where=filter_,
        postprocess=methods[0],
        offset=offset,
        min_score=min_score,
        model=model,
        force=force,
        filter_name="--filter",
        vectors=read_vector_file(vector) if vector is not None else None,
        texts=texts or (),
        min_probability=min_probability,
        collapse_duplicates=collapse_duplicates,
        cutoff=cutoff,
    )
    bars = not quiet and len(images or []) > batch_size  # many images: progress bars; few: one line meanwhile
    with activity(f"opening {index_dir} and searching", enabled=not quiet and not bars):
        found = api.search_index(request, batch_size=batch_size, threads=threads, progress=bars)
    queries, failures, where = found.queries, found.failures, request.settings.where
    echo_failures(failures)
    for warning in found.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if cut := sum(query.below_min_score for query in queries):
        typer.echo(f"--min-score {min_score} cut {cut} of the {len(queries)} x {k} hits", err=True)
    if cut := sum(query.below_min_probability for query in queries):
        typer.echo(f"--min-probability {min_probability} cut {cut} of the {len(queries)} x {k} hits", err=True)
    if where is not None and queries and not any(query.hits for query in queries):
        typer.echo(f"no item of {index_dir} matches --filter {json.dumps(where.to_json())}", err=True)
    if fmt == "json":
        text = json.dumps(json_document(queries, request, failures), indent=2, ensure_ascii=False) + "\n"
    else:
        text = csv_document(queries, offset) if fmt == "csv" else table_text(queries, offset=offset) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        atomic_write_text(out, text)
        typer.echo(f"wrote {len(queries)} queries x up to {k} results to {out}", err=True)


def _output_format(as_json: bool, as_csv: bool, out: Path | None) -> Format:
    """--json / --csv, or the --out file's suffix; a table on the terminal otherwise."""
    if as_json and as_csv:
        raise ConfigError("choose one of --json and --csv")
    if as_json or as_csv:
        return "json" if as_json else "csv"
    if out is None:
        return "table"
    suffix = out.suffix.lower()
    if suffix not in (".json", ".csv"):
        raise ConfigError(f"cannot tell the format of --out {out}: name it *.json or *.csv, or pass --json / --csv")
    return "json" if suffix == ".json" else "csv"


def register(app: typer.Typer) -> None:
    """Add ``search`` to the top-level app."""
    app.command("search")(search)
