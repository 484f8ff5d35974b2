"""``retrieval export``'s options, one alias each, and the choices of ``--checkpoint`` and ``--quantize``."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer


class CheckpointChoice(str, Enum):
    best = "best"
    last = "last"


class QuantizeChoice(str, Enum):
    int8 = "int8"


RunDirArg = Annotated[Path, typer.Argument(help="run directory written by `retrieval train`")]
ExportOutOpt = Annotated[Path | None, typer.Option("--out", help="output directory (default RUN_DIR/export)")]
Fp16Opt = Annotated[
    bool,
    typer.Option(
        "--fp16",
        help="store fp16 weights: half the file size; inputs/outputs stay float32 (on CPU, onnxruntime runs fp16 slower)",
    ),
]
CheckpointOpt = Annotated[CheckpointChoice, typer.Option("--checkpoint", help="which checkpoint to export")]
QuantizeOpt = Annotated[
    QuantizeChoice | None,
    typer.Option(
        "--quantize",
        help="int8: INT8 model (onnxruntime: a convolutional trunk static, calibrated on the run's training "
        "images; a vision transformer's MatMuls dynamic, nothing calibrated), written instead of the float one "
        "after a retrieval check on the validation classes",
    ),
]
MaxMapDropOpt = Annotated[
    float,
    typer.Option("--max-map-drop", help="--quantize: largest validation MAP@R loss allowed, in points (0.01)"),
]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="--quantize: write the INT8 model even when it fails the check")
]
CalibrationImagesOpt = Annotated[
    int,
    typer.Option(
        "--calibration-images", min=1, help="--quantize: training images that calibrate it (not a transformer)"
    ),
]
ExportDataOpt = Annotated[
    Path | None,
    typer.Option("--data", help="--quantize: the run's dataset, if it moved (default: config.yaml's data.path)"),
]
