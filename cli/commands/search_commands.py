"""``retrieval search INDEX IMG [IMG ...] | --id ITEM_ID | --text WORDS``: batched search from the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import typer

from retrieval.cli.activity import activity
from retrieval.cli.commands.index_commands import echo_failures
from retrieval.cli.options.index_options import BatchOpt, IndexArg, QuietOpt, ThreadsOpt
from retrieval.cli.options.search_options import (
    BinaryOpt,
    CollapseOpt,
    CsvOpt,
    CutoffOpt,
    DiversityOpt,
    FilterOpt,
    ForceOpt,
    GroupByOpt,
    GroupSizeOpt,
    IdOpt,
    ImagesArg,
    JsonOpt,
    KindOpt,
    KOpt,
    MinProbabilityOpt,
    MinScoreOpt,
    ModelOpt,
    NegativeOpt,
    OffsetOpt,
    OutOpt,
    PositiveOpt,
    PostprocessOpt,
    RerankOpt,
    StrategyOpt,
    TextOpt,
    VectorOpt,
)
from retrieval.cli.search_output import csv_document, json_document, table_text
from retrieval.indexing import usecases as api
from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.search.postprocess_params import QUERY_METHODS, parse_methods
from retrieval.indexing.usecases.vector_input import read_vector_file

Format = Literal["table", "json", "csv"]


def _id_or_key(example: str) -> int | str:
    """``--positive 12`` names item 12; any other text is an item's key."""
    return int(example) if example.isdigit() else example


def search(
    index_dir: IndexArg,
    images: ImagesArg = None,
    item_ids: IdOpt = None,
    vector: VectorOpt = None,
    texts: TextOpt = None,
    k: KOpt = 10,
    kind: KindOpt = None,
    binary: BinaryOpt = False,
    rerank: RerankOpt = None,
    filter_: FilterOpt = None,
    offset: OffsetOpt = 0,
    min_score: MinScoreOpt = None,
    min_probability: MinProbabilityOpt = None,
    cutoff: CutoffOpt = "none",
    collapse_duplicates: CollapseOpt = False,
    postprocess: PostprocessOpt = "none",
    positive: PositiveOpt = None,
    negative: NegativeOpt = None,
    strategy: StrategyOpt = None,
    group_by: GroupByOpt = None,
    group_size: GroupSizeOpt = 1,
    diversity: DiversityOpt = None,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    out: OutOpt = None,
    model: ModelOpt = None,
    force: ForceOpt = False,
    batch_size: BatchOpt = 32,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Find the items of an index most similar to each query image (or stored item, vector or text) and print them."""
    fmt = _output_format(as_json, as_csv, out)
    _require_a_query(bool(images or item_ids or texts or positive or negative) or vector is not None)
    request = api.SearchRequest.of(  # a malformed filter or a threshold outside -1..1 fails before any embedding
        index_dir,
        images or [],
        item_ids or [],
        k=k,
        kind=api.aliased("kind", kind, "--binary", "binary" if binary else None) or "float",
        rerank=rerank,
        where=filter_,
        postprocess=_postprocess_method(postprocess),
        offset=offset,
        min_score=min_score,
        model=model,
        force=force,
        filter_name="--filter",
        vectors=read_vector_file(vector) if vector is not None else None,
        texts=texts or (),
        **_probability(min_probability, cutoff),
        collapse_duplicates=collapse_duplicates,
        **_examples(positive, negative, strategy),
        **_grouping(group_by, group_size, diversity),
    )
    bars = not quiet and len(images or []) > batch_size  # many images: progress bars; few: one line meanwhile
    with activity(f"opening {index_dir} and searching", enabled=not quiet and not bars):
        found = api.search_index(request, batch_size=batch_size, threads=threads, progress=bars)
    _print_found(found, request, fmt, out)


def _require_a_query(given: bool) -> None:
    if not given:
        raise ConfigError(
            "give one or more query images, --id ITEM_ID to search by a stored item, --vector FILE.npy, --text WORDS, "
            "or --positive ID_OR_KEY"
        )


def _examples(positive: list[str] | None, negative: list[str] | None, strategy: str | None) -> dict[str, Any]:
    """``--positive`` / ``--negative`` / ``--strategy`` as ``SearchRequest.of``'s keywords."""
    return {
        "positive": [_id_or_key(example) for example in positive or []],
        "negative": [_id_or_key(example) for example in negative or []],
        "strategy": strategy,
    }


def _probability(min_probability: float | None, cutoff: str) -> dict[str, Any]:
    """``--min-probability`` / ``--cutoff`` as ``SearchRequest.of``'s keywords."""
    return {"min_probability": min_probability, "cutoff": cutoff}


def _grouping(group_by: str | None, group_size: int, diversity: float | None) -> dict[str, Any]:
    """``--group-by`` / ``--group-size`` / ``--diversity`` as ``SearchRequest.of``'s keywords."""
    return {"group_by": group_by, "group_size": group_size, "diversity": diversity}


def _print_found(found: api.SearchOutcome, request: api.SearchRequest, fmt: Format, out: Path | None) -> None:
    """The hits as a table, JSON or CSV (on stdout or into ``out``); what was cut and why on stderr."""
    queries, settings, where = found.queries, request.settings, request.settings.where
    echo_failures(found.failures)
    for warning in found.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if cut := sum(query.below_min_score for query in queries):
        typer.echo(f"--min-score {settings.min_score} cut {cut} of the {len(queries)} x {settings.k} hits", err=True)
    if cut := sum(query.below_min_probability for query in queries):
        shown = f"--min-probability {settings.min_probability}"
        typer.echo(f"{shown} cut {cut} of the {len(queries)} x {settings.k} hits", err=True)
    if where is not None and queries and not any(query.hits for query in queries):
        typer.echo(f"no item of {request.index_dir} matches --filter {json.dumps(where.to_json())}", err=True)
    if fmt == "json":
        text = json.dumps(json_document(queries, request, found.failures), indent=2, ensure_ascii=False) + "\n"
    else:
        offset = settings.offset
        text = csv_document(queries, offset) if fmt == "csv" else table_text(queries, offset=offset) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        atomic_write_text(out, text)
        typer.echo(f"wrote {len(queries)} queries x up to {settings.k} results to {out}", err=True)


def _postprocess_method(postprocess: str) -> str:
    methods = parse_methods(postprocess, QUERY_METHODS)
    if len(methods) > 1:
        raise ConfigError(f"--postprocess takes one of {', '.join(QUERY_METHODS)}, got {postprocess!r}")
    return methods[0]


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
