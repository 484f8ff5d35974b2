"""``retrieval export RUN_DIR``: trained checkpoint -> model.onnx + model.json (parity-checked)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from retrieval.indexing.exported_model.model_manifest import Quantization


class CheckpointChoice(str, Enum):
    best = "best"
    last = "last"


class QuantizeChoice(str, Enum):
    int8 = "int8"


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
    quantize: Annotated[
        QuantizeChoice | None,
        typer.Option(
            "--quantize",
            help="int8: INT8 model (onnxruntime: a convolutional trunk static, calibrated on the run's training "
            "images; a vision transformer's MatMuls dynamic, nothing calibrated), written instead of the float one "
            "after a retrieval check on the validation classes",
        ),
    ] = None,
    max_map_drop: Annotated[
        float,
        typer.Option("--max-map-drop", help="--quantize: largest validation MAP@R loss allowed, in points (0.01)"),
    ] = 1.0,
    force: Annotated[
        bool, typer.Option("--force", help="--quantize: write the INT8 model even when it fails the check")
    ] = False,
    calibration_images: Annotated[
        int,
        typer.Option(
            "--calibration-images", min=1, help="--quantize: training images that calibrate it (not a transformer)"
        ),
    ] = 256,
    data: Annotated[
        Path | None,
        typer.Option("--data", help="--quantize: the run's dataset, if it moved (default: config.yaml's data.path)"),
    ] = None,
) -> None:
    """Export a trained run to ONNX, check it against torch and write model.onnx + model.json."""
    from retrieval.training.usecases import (  # torch loads only for this command
        TOLERANCE,
        Int8Request,
        export_run,
        load_run_config,
        size_note,
    )

    int8 = Int8Request(calibration_images, max_map_drop, force, data, progress=True) if quantize else None
    result = export_run(run_dir, out, fp16=fp16, checkpoint=checkpoint.value, int8=int8)
    manifest = result.manifest
    typer.echo(f"wrote {result.onnx_path} and {result.manifest_path}")
    members = manifest.ensemble_members
    joined = f" = {members} members x {manifest.embedding_dim // members}, joined" if members > 1 else ""
    float_precision = "fp16" if fp16 else "fp32"
    typer.echo(
        f"embedding dim {manifest.embedding_dim}{joined} ({manifest.precision}, {manifest.backbone}); "
        f"{float_precision} onnxruntime vs torch max abs diff {result.max_abs_diff:.2e} "
        f"(tolerance {TOLERANCE[float_precision]:g})"
    )
    if note := size_note(manifest, load_run_config(run_dir).model.embedding_dim):
        typer.echo(note)
    if manifest.quantization is not None:
        typer.echo(int8_summary(manifest.quantization))
    if manifest.text is not None:
        typer.echo(
            f"text tower: {manifest.text.onnx_file} + {manifest.text.tokenizer_file} ({manifest.text.source}, "
            f"{manifest.text.context_length} tokens): search this model's index by words"
        )
    elif manifest.text_dropped is not None:
        typer.echo(manifest.text_dropped)
    typer.echo(f"next: {next_command(run_dir, out)}")


def int8_summary(quantization: Quantization) -> str:
    """One line: the INT8 model's validation retrieval next to the float model's."""
    check = quantization.check
    calibrated = f"INT8 ({quantization.format}) calibrated on {quantization.calibration_images} training images"
    if check is None:
        return f"{calibrated}; NOT checked (the run has no validation classes, --force)"
    change = 100 * (check.map_at_r_int8 - check.map_at_r_fp32)
    forced = " - over the limit, written because of --force" if check.forced else ""
    return (
        f"{calibrated}; validation ({check.images} images) MAP@R {check.map_at_r_fp32:.4f} -> "
        f"{check.map_at_r_int8:.4f} ({change:+.2f} points, at most {check.max_map_drop:g} may be lost){forced}, "
        f"R@1 {check.recall_at_1_fp32:.4f} -> {check.recall_at_1_int8:.4f}, "
        f"binary MAP@R {check.binary_map_at_r_fp32:.4f} -> {check.binary_map_at_r_int8:.4f}"
    )


def next_command(run_dir: Path, out: Path | None) -> str:
    """The ``index build`` command for this export, with the run's own data path: the test classes, or every
    class for a run that trained on all of them (``--split none``, ``--final-fit``)."""
    from retrieval.training.usecases import load_run_config

    config = load_run_config(run_dir)
    data = config.data.path or "DATA"
    model = out if out is not None else run_dir
    split = "all" if config.data.split == "none" else "test"
    return f"retrieval index build --model {model} --data {data} --split {split} --out {Path(run_dir) / 'index'}"


def register(app: typer.Typer) -> None:
    """Add ``export`` to the top-level app."""
    app.command("export")(export)
