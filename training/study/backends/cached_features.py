"""Pooled backbone features of every image, embedded once and cached on disk (``--cached-features``).

The backbone (with its ``--pretrained`` weights) runs once over all images with the evaluation
transform (shorter side resized, centre crop: no augmentation) and global pooling; the features
are saved as ``<cache>/<key>.npy`` with a ``<key>.json`` listing the records. The key hashes what
determines the features: backbone, weights (a file's size and time too), image size, pooling, and
each image's path, label, flags, size and modification time. A rerun with the same key loads the
file instead of embedding again; any change to those makes a new key.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from retrieval.indexing.common.atomic_write import atomic_write_bytes, atomic_write_text
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.splits import record_sort_key
from retrieval.training.config.hub_access import model_hub_access
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.data_loaders import build_eval_loader
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset, label_index
from retrieval.training.model.device import resolve_device, resolve_precision
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.model.pretrained import load_pretrained
from retrieval.training.run.inputs.embed import embed_loader

log = logging.getLogger(__name__)
RecordKey = tuple[str, str, bool, bool]


@dataclass(frozen=True)
class FeatureSet:
    """Pooled features (N, F) of the readable records, row i belonging to ``records[i]``."""

    key: str
    records: list[ImageRecord]
    features: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])

    def rows(self, records: Sequence[ImageRecord]) -> np.ndarray:
        """Row positions of ``records`` (all must have been embedded)."""
        position = {record_sort_key(record): i for i, record in enumerate(self.records)}
        try:
            return np.array([position[record_sort_key(record)] for record in records], dtype=np.int64)
        except KeyError as missing:
            raise DataError(
                f"image {missing.args[0][1]} could not be read when the features were embedded; run the study again "
                "(its image scan then leaves the file out)"
            ) from None


def feature_key(cfg: TrainConfig, records: Sequence[ImageRecord]) -> str:
    """Hash of everything that determines the features of ``records`` under ``cfg``."""
    payload: dict[str, Any] = {
        "backbone": cfg.model.backbone,
        "pretrained": _weights_identity(cfg.model.pretrained),
        "image_size": cfg.data.image_size,
        "pooling": cfg.model.pooling,
        "records": [[*_record_key(record), *_file_identity(record.path)] for record in records],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:20]


def load_or_extract(cfg: TrainConfig, records: Sequence[ImageRecord], cache_dir: Path) -> FeatureSet:
    """The cached features of ``records`` if present, else embed them now and write the cache."""
    key = feature_key(cfg, records)
    array_path, meta_path = cache_dir / f"{key}.npy", cache_dir / f"{key}.json"
    if array_path.is_file() and meta_path.is_file():
        readable = json.loads(meta_path.read_text())["readable"]
        kept = [record for record, ok in zip(records, readable) if ok]
        features = np.load(array_path)
        log.info("cached features %s: %d images x %d", array_path, *features.shape)
        return FeatureSet(key, kept, features)
    features, readable = extract_features(cfg, records)
    buffer = io.BytesIO()
    np.save(buffer, features)
    atomic_write_bytes(array_path, buffer.getvalue())
    meta = {
        "backbone": cfg.model.backbone,
        "pretrained": cfg.model.pretrained,
        "image_size": cfg.data.image_size,
        "pooling": cfg.model.pooling,
        "records": [list(_record_key(record)) for record in records],
        "readable": readable.tolist(),
    }
    atomic_write_text(meta_path, json.dumps(meta) + "\n")
    return FeatureSet(key, [record for record, ok in zip(records, readable) if ok], features)


def extract_features(cfg: TrainConfig, records: Sequence[ImageRecord]) -> tuple[np.ndarray, np.ndarray]:
    """(features of the readable images (n, F) float32, readable mask (N,)): backbone + pooling, no head."""
    device = resolve_device(cfg.trainer.device)
    precision = resolve_precision(device, cfg.trainer.amp)
    model_cfg = cfg.model.model_copy(update={"embedding_dim": None, "layer_norm": False})
    with torch.random.fork_rng(devices=[]):  # a backbone without --pretrained: the same random weights every time
        torch.manual_seed(0)
        model = build_embedding_model(model_cfg, image_size=cfg.data.image_size)
    if cfg.model.pretrained:
        log.info(
            "pretrained weights: %s",
            load_pretrained(model, cfg.model.pretrained, model_hub_access(cfg.model)).summary(),
        )
    trunk = nn.Sequential(model.backbone, model.pool).to(device)
    if cfg.model.channels_last:
        trunk.to(memory_format=torch.channels_last)
    loader = build_eval_loader(records, label_index(records), cfg, device)
    log.info(
        "embedding %d images once with %s (frozen backbone) for --cached-features", len(records), cfg.model.backbone
    )
    features, _ = embed_loader(trunk, loader, device, precision, cfg.model.channels_last)
    dataset: ImageRecordDataset = loader.dataset  # type: ignore[assignment]
    readable = ~dataset.bad_mask()
    if not readable.any():
        raise DataError("no image could be read while embedding the features")
    return features[readable].astype(np.float32), readable


def _record_key(record: ImageRecord) -> RecordKey:
    return (str(record.path), record.label, record.is_query, record.is_gallery)


def _file_identity(path: Path) -> list[int]:
    try:
        stat = path.stat()
    except OSError:
        return [-1, -1]
    return [stat.st_size, stat.st_mtime_ns]


def _weights_identity(source: str | None) -> list[Any]:
    """A weights file is identified by its path, size and time; a named source by its name."""
    if source is None or not Path(source).is_file():
        return [source]
    return [str(Path(source).resolve()), *_file_identity(Path(source))]
