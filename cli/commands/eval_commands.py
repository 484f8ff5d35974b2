"""``retrieval eval``: Recall@K, MAP@R, R-precision, P@1 and NMI of a model or of an index."""

from __future__ import annotations

import datetime as dt
import importlib.util
from collections.abc import Callable
from functools import partial
from pathlib import Path

import typer

from retrieval.cli.options.eval_options import (
    EvalBatchOpt,
    EvalDataOpt,
    EvalIndexOpt,
    EvalModelOpt,
    EvalOutOpt,
    EvalSplitOpt,
    EvalThreadsOpt,
    GridOpt,
    KsOpt,
    NeighboursKOpt,
    NeighboursOpt,
    PostprocessOpt,
    PostprocessParamsOpt,
    PromptOpt,
    ReferenceOpt,
)
from retrieval.cli.options.index_options import QuietOpt
from retrieval.indexing import usecases as api
from retrieval.indexing.probability.held_out import summary_lines


def _recall_at(metrics: api.RetrievalMetrics, k: int) -> float | None:
    return metrics.recall_at_k.get(k)


def parse_ks(text: str | None) -> tuple[int, ...] | None:
    """'1,2,4,8' -> (1, 2, 4, 8); None keeps the dataset-dependent default."""
    if not text:
        return None
    try:
        ks = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise api.ConfigError(f"--ks must be comma-separated positive integers like 1,2,4,8, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise api.ConfigError(f"--ks must be comma-separated positive integers like 1,2,4,8, got {text!r}")
    return ks


def format_table(report: api.EvaluationReport) -> str:
    """Metrics as rows, kinds (and exact twins of approximate kinds, and the reference row's) as columns."""
    columns: list[tuple[str, api.RetrievalMetrics]] = [(kind, report.metrics[kind]) for kind in api.KINDS]
    columns += [(f"{kind} (exact)", report.exact[kind]) for kind in api.KINDS if report.exact]
    for row in (report.reference, report.whitened_reference):
        if row is not None:
            columns += [(f"{row.name} {kind}", row.metrics[kind]) for kind in api.KINDS]
    if report.text_to_image is not None:  # a prompt per class searched in the images by the text tower
        columns.append(("text->image", report.text_to_image))
    rows: list[tuple[str, Callable[[api.RetrievalMetrics], float | None]]] = [
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
    left_out = report.left_out_queries
    dropped = f" ({left_out} left out: no other image of their class to retrieve)" if left_out else ""
    lines.append(
        f"{report.protocol} protocol, {report.num_queries} queries{dropped}, {report.num_gallery} gallery items, "
        f"model {report.model_sha256[:12]}"
    )
    if report.text_to_image is not None:
        lines.append(
            f"text->image: one prompt per class ({report.details.get('text_prompt')!r}), "
            f"{report.text_to_image.num_queries} queries, the same gallery, float"
        )
    return "\n".join(lines)


def format_postprocess_table(report: api.EvaluationReport) -> str:
    """One row per post-processing method: MAP@R and R@1, float and binary, and the change from the raw row."""
    names = ("MAP@R float", "R@1 float", "MAP@R binary", "R@1 binary")
    lines = [f"{'postprocess':<13}" + "".join(f"{name:>18}" for name in names)]
    for method, kinds in report.postprocess.items():
        cells = ""
        for kind in api.KINDS:
            raw, found = report.metrics[kind], kinds[kind]
            for value, base in ((found.map_at_r, raw.map_at_r), (found.precision_at_1, raw.precision_at_1)):
                cells += f"{f'{value:.4f} ({100 * (value - base):+.1f})':>18}"
        lines.append(f"{method:<13}{cells}")
    lines.append(
        f"(in brackets: the change from the raw row, in points; parameters {report.details.get('postprocess_params')})"
    )
    return "\n".join(lines)


def default_out_dir() -> Path:
    return Path(f"eval-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")


def evaluate(
    model: EvalModelOpt = None,
    data: EvalDataOpt = None,
    index: EvalIndexOpt = None,
    split: EvalSplitOpt = "test",
    out: EvalOutOpt = None,
    ks: KsOpt = None,
    grid: GridOpt = 6,
    batch_size: EvalBatchOpt = 32,
    threads: EvalThreadsOpt = None,
    neighbours: NeighboursOpt = None,
    neighbours_k: NeighboursKOpt = 10,
    reference: ReferenceOpt = True,
    postprocess: PostprocessOpt = None,
    postprocess_params: PostprocessParamsOpt = None,
    prompt: PromptOpt = api.DEFAULT_PROMPT,
    quiet: QuietOpt = False,
) -> None:
    """Measure float and binary (sign-bit) retrieval; write metrics.json and retrieval_grid.png. A model with a
    text tower also gets a text->image column (one --prompt per class)."""
    chosen_ks = parse_ks(ks)
    methods = api.parse_methods(postprocess) if postprocess else ()
    params = api.load_params(postprocess_params) if postprocess_params else None
    if neighbours is not None:
        api.table_suffix(neighbours)  # a bad name or a missing pyarrow fails before the evaluation
    request = api.EvalRequest.of(
        model,
        data,
        index=index,
        split=split,
        ks=chosen_ks,
        grid=grid,
        neighbours_k=neighbours_k if neighbours is not None else None,
        batch_size=batch_size,
        threads=threads,
        postprocess=tuple(methods),
        postprocess_params=params,
        prompt=prompt,
    )
    out_dir = out or default_out_dir()
    evaluation = api.run_eval(request, progress=not quiet)
    if reference and model is not None:
        _reference_columns(model, evaluation, quiet=quiet)
    _print_and_save(evaluation, out_dir, neighbours, neighbours_k)


def _print_and_save(evaluation: api.Evaluation, out_dir: Path, neighbours: Path | None, neighbours_k: int) -> None:
    """The warning, the metrics tables and the calibration lines; then what ``save_evaluation`` wrote."""
    if evaluation.warning is not None:
        typer.secho(f"warning: {evaluation.warning}", fg=typer.colors.YELLOW, err=True)
    typer.echo(format_table(evaluation.report))
    if evaluation.report.postprocess:
        typer.echo(format_postprocess_table(evaluation.report))
    for line in summary_lines(evaluation.report.details.get("calibration")):  # type: ignore[arg-type]
        typer.echo(line)
    written = api.save_evaluation(evaluation, out_dir, neighbours)
    typer.echo(f"wrote {written.metrics}" + (f" and {written.grid}" if written.grid is not None else ""))
    if written.calibration is not None:
        typer.echo(f"wrote {written.calibration}")
    if written.neighbours is not None and evaluation.neighbours is not None:
        count = len(evaluation.neighbours[0])
        typer.echo(f"wrote the top {neighbours_k} results of each of {count} queries to {written.neighbours}")


def _reference_columns(model: Path, evaluation: api.Evaluation, *, quiet: bool) -> None:
    """``--reference``: the columns of the backbone ``model`` was trained from (training's
    ``reference_columns``), when its run directory and torch are here; else a line saying why not."""
    if not quiet:
        typer.echo("measuring the backbone the model was trained from (loads torch) ...", err=True)
    run_dir = api.run_dir_of(model)
    if run_dir is None:
        typer.echo(f"no reference column: no training run config.yaml with {model} (pass the run directory)", err=True)
        return
    if importlib.util.find_spec("torch") is None:
        typer.echo("no reference column: it needs torch (pip install 'retrieval[train]')", err=True)
        return
    from retrieval.training.usecases import reference_column, whitened_reference_column

    report = evaluation.report
    announce = None if quiet else partial(typer.echo, err=True)
    report.reference, note = reference_column(
        run_dir, evaluation.all_records, evaluation.records, evaluation.manifest, report.ks, announce=announce
    )
    typer.echo(note, err=report.reference is None)
    report.whitened_reference, whitened_note = whitened_reference_column(run_dir, evaluation.records, report.ks)
    if whitened_note:
        typer.echo(whitened_note)


def register(app: typer.Typer) -> None:
    """Add ``eval`` to the top-level app."""
    app.command("eval")(evaluate)
