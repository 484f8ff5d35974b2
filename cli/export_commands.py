"""``retrieval export RUN_DIR``: trained checkpoint -> model.onnx + model.json (parity-checked)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer


class CheckpointChoice(str, Enum):
    best = "best"
    last = "last"


def export(
    run_dir: Annotated[Path, typer.Argument(help="run directory written by `retrieval train`")],
    out: Annotated[Path | None, typer.Option("--out", help="output directory (default RUN_DIR/export)")] = None,
    fp16: Annotated[
        bool,
        typer.Option(
            "--fp16",
            help="store fp16 weights: half the file size; inputs/outputs stay float32 (on CPU, onnxruntime runs fp16 slower)",
        ),
    ] = False,
    checkpoint: Annotated[
        CheckpointChoice, typer.Option("--checkpoint", help="which checkpoint to export")
    ] = CheckpointChoice.best,
) -> None:
    """Export a trained run to ONNX, check it against torch and write model.onnx + model.json."""
    from retrieval.training.export import TOLERANCE, export_run  # torch loads only for this command

    result = export_run(run_dir, out, fp16=fp16, checkpoint=checkpoint.value)
    manifest = result.manifest
    typer.echo(f"wrote {result.onnx_path} and {result.manifest_path}")
    members = manifest.ensemble_members
    joined = f" = {members} members x {manifest.embedding_dim // members}, joined" if members > 1 else ""
    typer.echo(
        f"embedding dim {manifest.embedding_dim}{joined} ({manifest.precision}, {manifest.backbone}); "
        f"onnxruntime vs torch max abs diff {result.max_abs_diff:.2e} (tolerance {TOLERANCE[manifest.precision]:g})"
    )
    typer.echo(f"next: {next_command(run_dir, out)}")


def next_command(run_dir: Path, out: Path | None) -> str:
    """The ``index build`` command for this export: the run's test classes, its own data path."""
    from retrieval.training.run_dir import load_run_config

    data = load_run_config(run_dir).data.path or "DATA"
    model = out if out is not None else run_dir
    return f"retrieval index build --model {model} --data {data} --split test --out {Path(run_dir) / 'index'}"


def register(app: typer.Typer) -> None:
    """Add ``export`` to the top-level app."""
    app.command("export")(export)
