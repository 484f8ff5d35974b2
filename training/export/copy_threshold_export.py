"""An export's copy threshold: measured on synthetic copies of the run's training images and added to
``model.json`` (``duplicates``), so that ``retrieval data duplicates`` and ``retrieval index duplicates``
start from the model's own threshold instead of a guess."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import DataError, RetrievalError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.duplicates.copy_threshold_measure import measure_copy_threshold
from retrieval.indexing.exported_model.model_manifest import ModelManifest, manifest_json
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.training.config.train_config import DataConfig
from retrieval.training.export.onnx_export import ExportResult

log = logging.getLogger(__name__)


def with_copy_threshold(result: ExportResult, data: DataConfig) -> ExportResult:
    """``result`` with its ``model.json`` rewritten to hold the measured copy threshold; unchanged (with a
    warning) when the run's data can no longer be read or is too small to measure on."""
    return dataclasses.replace(result, manifest=measured_copy_threshold(result.manifest, result.manifest_path, data))


def measured_copy_threshold(manifest: ModelManifest, manifest_path: Path, data: DataConfig) -> ModelManifest:
    """``manifest`` with the copy threshold measured on ``data``'s training split (every image when the data is
    too small to split: synthetic copies of any images measure it), written to ``manifest_path``; unchanged
    (with a warning) when that cannot be measured."""
    try:
        records = load_records(data.path) if data.path is not None else []
        images, described = _measured_on(records, data)
        embedder = OnnxEmbedder(manifest_path.parent)
        threshold = measure_copy_threshold(embedder, images, described_as=f"{described} of {data.path}")
    except (RetrievalError, OSError) as error:
        log.warning("model.json holds no copy threshold (%s); pass --threshold to the duplicates commands", error)
        return manifest
    manifest = manifest.model_copy(update={"duplicates": threshold})
    atomic_write_text(manifest_path, manifest_json(manifest))
    log.info("%s", threshold.sentence())
    return manifest


def _measured_on(records: list[ImageRecord], data: DataConfig) -> tuple[list[ImageRecord], str]:
    """The images the copy threshold is measured on, and how to name them: the training split's, or every
    image where the classes are too few to split (the copies are synthetic, so any images measure it)."""
    if data.split == "none":
        return list(records), f"{len(records)} images"
    try:
        splits = split_records(
            records, val_fraction=data.val_fraction, val_fold=data.val_fold, num_folds=data.num_folds
        )
    except DataError:
        return list(records), f"{len(records)} images (too few classes to split; the copies are synthetic)"
    return splits.train, f"{len(splits.train)} training images"
