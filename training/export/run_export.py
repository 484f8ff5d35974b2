"""``retrieval export RUN``: a run directory's checkpoint to ``model.onnx`` + ``model.json``.

A single run exports its model (``onnx_export``), with a CLIP run's text tower beside it where the run kept it
(``text_export``); an ensemble run (``retrieval train --ensemble``)
its members joined into one model (``ensemble_export``). Both write only a graph that passed its check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict
from retrieval.training.export.copy_threshold_export import with_copy_threshold
from retrieval.training.export.ensemble_export import export_ensemble
from retrieval.training.export.int8_export import Int8Request
from retrieval.training.export.onnx_export import (
    ExportResult,
    build_manifest,
    checkpoint_hashes,
    write_checked_export,
)
from retrieval.training.export.text_export import text_side_fields
from retrieval.training.run.fitting.final_fit import exported_calibration
from retrieval.training.run.outputs.run_dir import RunPaths
from retrieval.training.run.outputs.run_model import load_run_model


def export_run(
    run_dir: Path,
    out_dir: Path | None = None,
    *,
    fp16: bool = False,
    checkpoint: Literal["best", "last"] = "best",
    int8: Int8Request | None = None,
) -> ExportResult:
    """Export ``run_dir``'s checkpoint to ``out_dir`` (default run_dir/export) after the parity check.

    An ensemble run (``retrieval train --ensemble``) exports its members joined into one model. ``int8``
    quantizes it (calibrated on the run's training images, checked on its validation classes)."""
    paths = RunPaths(run_dir)
    if not paths.run_dir.is_dir():
        raise RetrievalError(
            f"run directory {paths.run_dir} does not exist; pass the directory `retrieval train` wrote"
        )
    out = Path(out_dir) if out_dir is not None else paths.export_dir
    if paths.ensemble_spec.is_file():
        return export_ensemble(paths, out, fp16=fp16, checkpoint=checkpoint, int8=int8)
    config, state, model = load_run_model(paths.run_dir, checkpoint)
    source = paths.best_checkpoint if checkpoint == "best" else paths.last_checkpoint
    sources = checkpoint_hashes(paths.run_dir, [source])
    text = text_side_fields(config, model, out)  # CLIP: text.onnx + tokenizer.json, or why there are none
    result = write_checked_export(
        model,
        config.data.image_size,
        out,
        fp16=fp16,
        manifest_for=lambda onnx_bytes, precision: build_manifest(
            config, state, onnx_bytes, model.embedding_dim, precision, run_verdict(paths), sources
        ).model_copy(update={"calibration": exported_calibration(paths) if checkpoint == "best" else None, **text}),
        int8=int8.for_run(config.data) if int8 is not None else None,
    )
    return with_copy_threshold(result, config.data)


def run_verdict(paths: RunPaths) -> TrainingVerdict | None:
    """The verdict the trainer ended with (``test_metrics.json``'s), if the run has a readable one."""
    try:
        return TrainingVerdict.model_validate(json.loads(paths.test_metrics.read_text())["verdict"])
    except (OSError, ValueError, KeyError, TypeError):  # pydantic's ValidationError is a ValueError
        return None
