"""``retrieval export RUN_DIR``: trained checkpoint -> model.onnx + model.json (parity-checked)."""

from __future__ import annotations

from pathlib import Path

import typer

from retrieval.cli.options.export_options import (
    CalibrationImagesOpt,
    CheckpointChoice,
    CheckpointOpt,
    ExportDataOpt,
    ExportOutOpt,
    ForceOpt,
    Fp16Opt,
    MaxMapDropOpt,
    QuantizeOpt,
    RunDirArg,
)
from retrieval.indexing.exported_model.model_manifest import Quantization


def export(
    run_dir: RunDirArg,
    out: ExportOutOpt = None,
    fp16: Fp16Opt = False,
    checkpoint: CheckpointOpt = CheckpointChoice.best,
    quantize: QuantizeOpt = None,
    max_map_drop: MaxMapDropOpt = 1.0,
    force: ForceOpt = False,
    calibration_images: CalibrationImagesOpt = 256,
    data: ExportDataOpt = None,
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
