"""``retrieval eval``: Recall@K, MAP@R, R-precision, P@1 and NMI of a model or of an index."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from retrieval.cli.eval_reference import reference_column
from retrieval.cli.index_commands import QuietOpt
from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.common.table_files import table_suffix, write_table
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.eval.class_overlap import overlap_warning, training_classes_in
from retrieval.indexing.eval.evaluation import (
    KINDS,
    EvalData,
    EvaluationReport,
    evaluate_index,
    evaluate_model,
    exact_neighbors,
    grid_queries,
    grid_rows,
    index_neighbors,
)
from retrieval.indexing.eval.metrics import RetrievalMetrics
from retrieval.indexing.eval.neighbour_table import neighbour_columns
from retrieval.indexing.eval.retrieval_grid import save_grid
from retrieval.indexing.model.manifest import ModelManifest
from retrieval.indexing.model.onnx_embedder import load_model_manifest
from retrieval.indexing.model.resolution import resolve_export_dir
from retrieval.indexing.store.backends import Store, open_store

METRICS_NAME = "metrics.json"
GRID_NAME = "retrieval_grid.png"
GRID_NEIGHBORS = 8


def _recall_at(metrics: RetrievalMetrics, k: int) -> float | None:
    return metrics.recall_at_k.get(k)


def parse_ks(text: str | None) -> tuple[int, ...] | None:
    """'1,2,4,8' -> (1, 2, 4, 8); None keeps the dataset-dependent default."""
    if not text:
        return None
    try:
        ks = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"--ks must be comma-separated positive integers like 1,2,4,8, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise ConfigError(f"--ks must be comma-separated positive integers like 1,2,4,8, got {text!r}")
    return ks


def format_table(report: EvaluationReport) -> str:
    """Metrics as rows, kinds (and exact twins of approximate kinds, and the reference row's) as columns."""
    columns: list[tuple[str, RetrievalMetrics]] = [(kind, report.metrics[kind]) for kind in KINDS]
    columns += [(f"{kind} (exact)", report.exact[kind]) for kind in KINDS if report.exact]
    if report.reference is not None:
        columns += [(f"{report.reference.name} {kind}", report.reference.metrics[kind]) for kind in KINDS]
    rows: list[tuple[str, Callable[[RetrievalMetrics], float | None]]] = [
        ("MAP@R", lambda m: m.map_at_r),
        ("R-precision", lambda m: m.r_precision),
        ("P@1", lambda m: m.precision_at_1),
        ("NMI", lambda m: m.nmi),
    ]
    rows += [(f"Recall@{k}", partial(_recall_at, k=k)) for k in report.ks]
    width = max(len(name) for name, _ in columns) + 2
    lines = [f"{'metric':<12}" + "".join(f"{name:>{width}}" for name, _ in columns)]
    for label, value in rows:
        cells = "".join(f"{'-' if value(m) is None else f'{value(m):.4f}':>{width}}" for _, m in columns)
        lines.append(f"{label:<12}{cells}")
    lines.append(
        f"{report.protocol} protocol, {report.num_queries} queries, {report.num_gallery} gallery items, "
        f"model {report.model_sha256[:12]}"
    )
    return "\n".join(lines)


def default_out_dir() -> Path:
    return Path(f"eval-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")


def evaluate(
    model: Annotated[Path | None, typer.Option("--model", help="export dir or training run dir (with --data)")] = None,
    data: Annotated[Path | None, typer.Option("--data", help="dataset to embed and evaluate (with --model)")] = None,
    index: Annotated[Path | None, typer.Option("--index", help="evaluate an index directory as built")] = None,
    split: Annotated[str, typer.Option("--split", help="all, train, val or test (with --data)")] = "test",
    out: Annotated[Path | None, typer.Option("--out", help="output directory (default ./eval-<timestamp>)")] = None,
    ks: Annotated[str | None, typer.Option("--ks", help="Recall@K list, e.g. 1,2,4,8 (default by dataset)")] = None,
    grid: Annotated[int, typer.Option("--grid", min=0, help="queries in retrieval_grid.png (0: none)")] = 6,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 32,
    threads: Annotated[int | None, typer.Option("--threads", help="onnxruntime threads")] = None,
    neighbours: Annotated[
        Path | None,
        typer.Option("--neighbours", help="also write each query's top results to FILE.parquet or FILE.csv"),
    ] = None,
    neighbours_k: Annotated[int, typer.Option("--neighbours-k", min=1, help="results per query in --neighbours")] = 10,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference/--no-reference",
            help="with --model: also measure the backbone it was trained from (pooled features; needs torch)",
        ),
    ] = True,
    quiet: QuietOpt = False,
) -> None:
    """Measure float and binary (sign-bit) retrieval; write metrics.json and retrieval_grid.png."""
    chosen_ks = parse_ks(ks)
    if neighbours is not None:
        table_suffix(neighbours)  # a bad name or a missing pyarrow fails before the evaluation
    if (index is None) == (model is None) or (model is not None and data is None) or (index and data):
        raise ConfigError("pass either --model MODEL --data PATH, or --index INDEX_DIR")
    out_dir = out or default_out_dir()
    if index is not None:
        with open_store(index) as store:
            report, eval_data = evaluate_index(store, ks=chosen_ks, progress=not quiet)
            queries = grid_queries(eval_data, grid)
            neighbors = index_neighbors(store, eval_data, queries, GRID_NEIGHBORS) if len(queries) else None
            ranked = _all_neighbours(eval_data, neighbours_k, store) if neighbours else None
            manifest = store.manifest.model
    else:
        assert model is not None and data is not None  # checked above
        all_records = load_records(data)
        records = select_split(all_records, split)
        report, eval_data = evaluate_model(
            model, records, ks=chosen_ks, batch_size=batch_size, threads=threads, progress=not quiet
        )
        report.details["split"] = split
        queries = grid_queries(eval_data, grid)
        neighbors = exact_neighbors(eval_data, queries, GRID_NEIGHBORS) if len(queries) else None
        ranked = _all_neighbours(eval_data, neighbours_k) if neighbours else None
        manifest = load_model_manifest(resolve_export_dir(model))
        if reference:
            report.reference, note = reference_column(
                model, all_records, records, manifest, report.ks, progress=not quiet
            )
            typer.echo(note, err=report.reference is None)
    _warn_about_training_classes(report, eval_data, manifest)
    typer.echo(format_table(report))
    atomic_write_text(out_dir / METRICS_NAME, json.dumps(report.to_json(), indent=2, default=_json_default) + "\n")
    if neighbors is not None:
        save_grid(grid_rows(eval_data, queries, neighbors), out_dir / GRID_NAME)
    typer.echo(f"wrote {out_dir / METRICS_NAME}" + (f" and {out_dir / GRID_NAME}" if neighbors is not None else ""))
    if neighbours is not None and ranked is not None:
        write_table(neighbours, neighbour_columns(eval_data, *ranked))
        typer.echo(f"wrote the top {neighbours_k} results of each of {len(ranked[0])} queries to {neighbours}")


def _all_neighbours(data: EvalData, k: int, store: Store | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(query positions, their top-k gallery positions): the index as built, or exact for --model."""
    queries = np.flatnonzero(data.is_query)
    found = index_neighbors(store, data, queries, k) if store is not None else exact_neighbors(data, queries, k)
    return queries, found


def _warn_about_training_classes(report: EvaluationReport, data: EvalData, manifest: ModelManifest) -> None:
    """Warn (and record in metrics.json) when the evaluated classes include the model's training classes."""
    overlap = training_classes_in(data.labels, manifest)
    report.details["training_classes_evaluated"] = len(overlap)
    if overlap:
        typer.secho(
            f"warning: {overlap_warning(overlap, len(set(data.labels.tolist())))}", fg=typer.colors.YELLOW, err=True
        )


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def register(app: typer.Typer) -> None:
    """Add ``eval`` to the top-level app."""
    app.command("eval")(evaluate)
