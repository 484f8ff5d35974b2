"""One embedding model to ``model.onnx`` + ``model.json``, checked against torch before writing.

The ONNX graph is the whole ``EmbeddingModel`` in eval mode (L2 normalisation included):
input ``images`` (N, 3, crop, crop) float32, output ``embeddings`` (N, D) float32, N dynamic.
It is exported with the TorchScript exporter (``dynamo=False``, opset 17; the dynamo exporter
needs onnxscript) into memory, TF-"same" paddings fixed for the crop size (``static_padding``),
optionally converted to fp16 weights (onnxruntime's float16 tool, inputs/outputs kept float32),
run with onnxruntime on random inputs and compared with torch. ``--quantize int8`` then
quantizes the checked float graph and replaces the torch comparison by a retrieval check on the
validation classes (``int8_export``). Only a graph that passed is written, atomically, so a bad
export never replaces a good one.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

from retrieval.indexing.common.artifact_names import MODEL_MANIFEST_NAME, MODEL_ONNX_NAME
from retrieval.indexing.common.atomic_write import atomic_write_bytes, atomic_write_text
from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.exported_model.model_manifest import ModelManifest, file_sha256, manifest_json
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.transforms import eval_preprocessing
from retrieval.training.export.int8_export import Int8Request, quantize_checked
from retrieval.training.model.onnx_graph import onnx_bytes

INPUT_NAME = "images"
OUTPUT_NAME = "embeddings"
# max |onnxruntime - torch| over unit-norm embeddings; fp16 weights and activations round to ~1e-3
TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2}
PARITY_BATCH = 4


@dataclass(frozen=True)
class ExportResult:
    manifest: ModelManifest
    onnx_path: Path
    manifest_path: Path
    max_abs_diff: float  # onnxruntime vs torch on random inputs


def write_checked_export(
    model: torch.nn.Module,
    image_size: int,
    out_dir: Path,
    *,
    fp16: bool,
    manifest_for: Callable[[bytes, str], ModelManifest],
    int8: Int8Request | None = None,
) -> ExportResult:
    """Export ``model`` to ONNX, compare it with torch and, only within tolerance (and for ``int8`` only
    within the retrieval check's limit), write it with its manifest."""
    if fp16 and int8 is not None:
        raise RetrievalError("--fp16 and --quantize int8 exclude each other; pick one")
    precision = "fp16" if fp16 else "fp32"
    onnx_bytes = onnx_export_bytes(model, image_size, fp16=fp16)
    max_diff = parity_max_abs_diff(model, onnx_bytes, image_size)
    if not max_diff <= TOLERANCE[precision]:
        raise RetrievalError(
            f"the exported {precision} ONNX model differs from torch by {max_diff:.3g} "
            f"(tolerance {TOLERANCE[precision]:g}); nothing was written, report this with the run's config.yaml"
        )
    manifest = manifest_for(onnx_bytes, precision)
    if int8 is not None:
        onnx_bytes, quantization = quantize_checked(onnx_bytes, manifest, int8, manifest_for)
        manifest = manifest_for(onnx_bytes, "int8").model_copy(update={"quantization": quantization})
    atomic_write_bytes(out_dir / MODEL_ONNX_NAME, onnx_bytes)
    atomic_write_text(out_dir / MODEL_MANIFEST_NAME, manifest_json(manifest))
    return ExportResult(manifest, out_dir / MODEL_ONNX_NAME, out_dir / MODEL_MANIFEST_NAME, max_diff)


def onnx_export_bytes(model: torch.nn.Module, image_size: int, *, fp16: bool = False) -> bytes:
    """Serialise the eval-mode model to ONNX (dynamic batch); fp16 converts weights, keeps fp32 I/O."""
    graph = onnx_bytes(model, (2, 3, image_size, image_size), input_name=INPUT_NAME, output_name=OUTPUT_NAME)
    return _to_fp16(graph) if fp16 else graph


def _to_fp16(onnx_bytes: bytes) -> bytes:
    from onnxruntime.transformers.float16 import convert_float_to_float16

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the model contains values out of fp16 range" notices
        converted = convert_float_to_float16(onnx.load_from_string(onnx_bytes), keep_io_types=True)
    return converted.SerializeToString()


def parity_max_abs_diff(model: torch.nn.Module, onnx_bytes: bytes, image_size: int, seed: int = 0) -> float:
    """Max |onnxruntime - torch| on a batch of random normalised-image-like inputs."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(PARITY_BATCH, 3, image_size, image_size, generator=generator)
    return max_abs_diff_on(model, onnx_bytes, images, INPUT_NAME, OUTPUT_NAME)


def max_abs_diff_on(
    model: torch.nn.Module, onnx_bytes: bytes, inputs: torch.Tensor, input_name: str, output_name: str
) -> float:
    """Max |onnxruntime - torch| of the graph ``onnx_bytes`` and ``model`` on ``inputs`` (inf: other shapes)."""
    import onnxruntime as ort

    with torch.no_grad():
        expected = model.eval()(inputs).numpy()
    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    actual = session.run([output_name], {input_name: inputs.numpy()})[0]
    if actual.shape != expected.shape:
        return float("inf")
    return float(np.max(np.abs(actual.astype(np.float32) - expected)))


def build_manifest(
    config: TrainConfig,
    state: dict[str, Any],
    onnx_bytes: bytes,
    embedding_dim: int,
    precision: str,
    verdict: TrainingVerdict | None = None,
    source_checkpoints: dict[str, str] | None = None,
) -> ModelManifest:
    """``model.json`` of an export; ``source_checkpoints``: sha256 of the checkpoints it was made from, by
    path in the run directory (``checkpoint_hashes``)."""
    return ModelManifest(
        onnx_sha256=hashlib.sha256(onnx_bytes).hexdigest(),
        input_name=INPUT_NAME,
        output_name=OUTPUT_NAME,
        embedding_dim=embedding_dim,
        l2_normalized=True,
        binarization_threshold=0.0,
        precision=precision,
        preprocessing=eval_preprocessing(config.data, config.model.backbone),
        backbone=config.model.backbone,
        loss=str(state.get("loss_name") or config.loss.name),
        config_hash=config.config_hash(),
        validation_metrics=_numeric_metrics(state.get("val_metrics")),
        training_classes=[str(label) for label in state.get("training_classes") or []],
        verdict=verdict,
        source_checkpoints=dict(source_checkpoints or {}),
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def checkpoint_hashes(run_dir: Path, checkpoints: list[Path]) -> dict[str, str]:
    """sha256 of each checkpoint file, keyed by its path relative to the run directory."""
    return {path.relative_to(run_dir).as_posix(): file_sha256(path) for path in checkpoints}


def _numeric_metrics(metrics: Any) -> dict[str, float]:
    """Keep the scalar entries of the checkpoint's validation metrics (the manifest holds floats only)."""
    if not isinstance(metrics, dict):
        return {}
    scalars = {}
    for key, value in metrics.items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
            scalars[str(key)] = float(value)
    return scalars
