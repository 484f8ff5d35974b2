"""``retrieval export --quantize int8``: calibrate on the run's training images, then check retrieval.

The float graph that passed the torch parity check is quantized (``int8_quantization``) with
ranges calibrated on a deterministic sample of the run's TRAINING images (the ones whose
``subsample_key`` hash sorts first: the same images on every machine, spread over the classes),
decoded and preprocessed exactly as ``model.json`` prescribes (``preprocess_image``, the index's
and the service's own path). The parity check then becomes a retrieval check: the float and the
INT8 model embed the run's VALIDATION classes through ``evaluate_model`` (what ``retrieval eval``
runs), and an INT8 model that loses more than ``max_map_drop`` points of MAP@R is refused, with
nothing written, unless forced.
"""

from __future__ import annotations

import itertools
import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import MODEL_MANIFEST_NAME, MODEL_ONNX_NAME
from retrieval.indexing.common.errors import DataError, RetrievalError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.subsample import subsample_key
from retrieval.indexing.eval.evaluation import EvaluationReport, evaluate_model
from retrieval.indexing.exported_model.cpu_kind import cpu_kind
from retrieval.indexing.exported_model.model_manifest import (
    Int8Check,
    ModelManifest,
    Preprocessing,
    Quantization,
    manifest_json,
)
from retrieval.indexing.exported_model.preprocess import preprocess_image
from retrieval.training.config.train_config import DataConfig
from retrieval.training.data_pipeline.run_data import prepare_run_data
from retrieval.training.export.int8_quantization import REDUCE_RANGE, WEIGHTS, quantize_int8

log = logging.getLogger(__name__)

DEFAULT_CALIBRATION_IMAGES = 256
DEFAULT_MAX_MAP_DROP = 1.0
"""Points of validation MAP@R (absolute, 1 point = 0.01) the INT8 model may lose."""
_CALIBRATION_BATCH = 16


@dataclass(frozen=True)
class Int8Request:
    """What ``--quantize int8`` needs beyond the float export: the run's data and the check's limit."""

    calibration_images: int = DEFAULT_CALIBRATION_IMAGES
    max_map_drop: float = DEFAULT_MAX_MAP_DROP
    force: bool = False
    data_path: Path | None = None  # where the run's dataset is now (default: its config's data.path)
    progress: bool = False
    data: DataConfig | None = None  # the run's data section, filled in by ``for_run``

    def for_run(self, data: DataConfig) -> Int8Request:
        """This request with the run's data section (split settings), its path overridden by ``data_path``."""
        return replace(self, data=data.model_copy(update={"path": self.data_path or data.path}))


def quantize_checked(
    float_bytes: bytes,
    float_manifest: ModelManifest,
    request: Int8Request,
    manifest_for: Callable[[bytes, str], ModelManifest],
) -> tuple[bytes, Quantization]:
    """INT8 bytes and their ``quantization`` record, or a RetrievalError when the check refuses them."""
    if request.calibration_images < 1:
        raise RetrievalError(f"--calibration-images must be at least 1, got {request.calibration_images}")
    if request.data is None:
        raise ValueError("call Int8Request.for_run(config.data) before quantizing")
    splits = prepare_run_data(request.data, progress=request.progress).splits
    if not splits.val and not request.force:
        raise RetrievalError(
            "the run has no validation classes (data.val_fraction 0), so the INT8 model cannot be checked; "
            "pass --force to write it unchecked"
        )
    batches = calibration_batches(splits.train, float_manifest.preprocessing, request.calibration_images)
    first = next(batches, None)
    if first is None:
        raise DataError("none of the training images chosen for calibration could be read; check the dataset path")
    quantized = quantize_int8(float_bytes, float_manifest.input_name, itertools.chain([first], batches))
    int8_manifest = manifest_for(quantized.onnx_bytes, "int8")
    check = retrieval_check((float_bytes, float_manifest), (quantized.onnx_bytes, int8_manifest), splits.val, request)
    record = Quantization(
        format=quantized.format,
        activations=quantized.activations,
        weights=WEIGHTS,
        reduce_range=REDUCE_RANGE,
        calibration_method=quantized.calibration_method,
        calibration_images=quantized.calibration_images,
        float_onnx_sha256=float_manifest.onnx_sha256,
        float_nodes=quantized.float_nodes,
        check=check,
    )
    return quantized.onnx_bytes, record


def calibration_records(train: Sequence[ImageRecord], count: int) -> list[ImageRecord]:
    """The ``count`` training records whose ``subsample_key`` sorts first (deterministic, class-mixed)."""
    return sorted(train, key=subsample_key)[:count]


def calibration_batches(train: Sequence[ImageRecord], preprocessing: Preprocessing, count: int) -> Iterator[np.ndarray]:
    """Preprocessed batches of the calibration images; unreadable ones are skipped (training skips them too)."""
    batch: list[np.ndarray] = []
    for record in calibration_records(train, count):
        try:
            batch.append(preprocess_image(open_rgb(record.path), preprocessing))
        except Exception as error:  # noqa: BLE001 - one bad file must not stop the export
            log.warning("calibration skips %s: %s", record.path, error)
            continue
        if len(batch) == _CALIBRATION_BATCH:
            yield np.stack(batch)
            batch = []
    if batch:
        yield np.stack(batch)


def retrieval_check(
    float_model: tuple[bytes, ModelManifest],
    int8_model: tuple[bytes, ModelManifest],
    validation: Sequence[ImageRecord],
    request: Int8Request,
) -> Int8Check | None:
    """Validation MAP@R and R@1 of both models (None without validation classes: forced, unchecked);
    raises when the drop exceeds the limit and not forced."""
    if not validation:
        log.warning("the run has no validation classes: the INT8 model is written unchecked (--force)")
        return None
    float_report, images = _evaluate(*float_model, validation, request.progress)
    int8_report, _ = _evaluate(*int8_model, validation, request.progress)
    check = _check_of(float_report, int8_report, images, request.max_map_drop)
    drop = 100 * (check.map_at_r_fp32 - check.map_at_r_int8)
    if drop > request.max_map_drop and not request.force:
        raise RetrievalError(
            f"the INT8 model loses {drop:.2f} points of validation MAP@R ({check.map_at_r_fp32:.4f} -> "
            f"{check.map_at_r_int8:.4f} on {check.images} images), more than --max-map-drop {request.max_map_drop:g}; "
            "nothing was written (export in float, allow a larger drop, or pass --force to write it anyway)"
        )
    return check.model_copy(update={"forced": drop > request.max_map_drop})


def _evaluate(
    onnx_bytes: bytes, manifest: ModelManifest, records: Sequence[ImageRecord], progress: bool
) -> tuple[EvaluationReport, int]:
    """``retrieval eval``'s measurement of one model (from a temporary export directory), and the images it read."""
    with tempfile.TemporaryDirectory(prefix="retrieval-check-") as tmp:
        (Path(tmp) / MODEL_ONNX_NAME).write_bytes(onnx_bytes)
        (Path(tmp) / MODEL_MANIFEST_NAME).write_text(manifest_json(manifest))
        report, data = evaluate_model(Path(tmp), records, progress=progress)
    return report, len(data.labels)


def _check_of(float_report: EvaluationReport, int8_report: EvaluationReport, images: int, limit: float) -> Int8Check:
    fp32, int8 = float_report.metrics, int8_report.metrics
    return Int8Check(
        split="val",
        images=images,
        map_at_r_fp32=fp32["float"].map_at_r,
        map_at_r_int8=int8["float"].map_at_r,
        recall_at_1_fp32=fp32["float"].precision_at_1,  # Recall@1 = P@1 (docs/metrics.md)
        recall_at_1_int8=int8["float"].precision_at_1,
        binary_map_at_r_fp32=fp32["binary"].map_at_r,
        binary_map_at_r_int8=int8["binary"].map_at_r,
        max_map_drop=limit,
        cpu=cpu_kind(),
    )
