"""The reference column of ``retrieval eval --model``: the run's starting backbone on the same images.

The backbone is rebuilt from the run's ``config.yaml``: its pretrained weights (``model.pretrained``),
or, for a run trained from random weights, the random initialisation the trainer drew with the same
seed. ``training.reference`` turns its pooled features into embeddings; they are measured with the
same function and protocol as the exported model's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.evaluation import EvalData, ReferenceRow, exact_metrics
from retrieval.training.config.hub_access import has_tower_embedding, model_hub_access
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.data_loaders import build_eval_loader
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset, label_index
from retrieval.training.model.device import Precision, resolve_device
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model
from retrieval.training.model.pretrained import load_pretrained
from retrieval.training.run.inputs.embed import embed_loader
from retrieval.training.run.measures.reference import pretrained_reference, reference_name
from retrieval.training.run.outputs.run_dir import RunPaths, load_checkpoint
from retrieval.training.run.outputs.run_model import restore_model

log = logging.getLogger(__name__)


def starting_model(cfg: TrainConfig) -> EmbeddingModel:
    """The run's model before training: pretrained weights loaded, or the trainer's seeded random ones."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.trainer.seed)  # as the trainer (rank 0) seeds before building its model
        model = build_embedding_model(cfg.model, image_size=cfg.data.image_size)
    if cfg.model.pretrained:
        log.info(
            "reference weights: %s", load_pretrained(model, cfg.model.pretrained, model_hub_access(cfg.model)).summary()
        )
    return model


def reference_row(
    cfg: TrainConfig,
    records: Sequence[ImageRecord],
    train_records: Sequence[ImageRecord],
    *,
    dim: int,
    ks: Sequence[int],
    run_dir: Path | None = None,
) -> ReferenceRow:
    """Float and binary metrics of the reference embeddings of ``records``: the run's own reference model
    (``checkpoints/reference.pt``, the trainer's epoch 0) where it has one, else fitted on ``train_records``."""
    paths = RunPaths(run_dir) if run_dir is not None else None
    if paths is not None and paths.reference_checkpoint.is_file():
        return _saved_reference_row(cfg, paths, records, ks)
    device = resolve_device("auto")
    model = starting_model(cfg).to(device)
    if cfg.model.channels_last:
        model.to(memory_format=torch.channels_last)
    full_precision = Precision(False, torch.float32, False)
    reference = pretrained_reference(
        model, cfg, records, train_records, dim=dim, device=device, precision=full_precision
    )
    keep = ~reference.dataset.bad_mask()
    data = EvalData.from_records([r for r, ok in zip(records, keep) if ok], reference.embeddings[keep])
    details = {**reference.details(), "backbone": cfg.model.backbone, "weights": cfg.model.pretrained}
    return ReferenceRow(reference.name, exact_metrics(data, ks), details)


def whitened_reference_row(
    cfg: TrainConfig, records: Sequence[ImageRecord], ks: Sequence[int], run_dir: Path
) -> ReferenceRow | None:
    """The "pretrained + whitening" row: the reference model with the run's whitening stage fitted on it
    (``checkpoints/reference_whitened.pt``), or None when the run has none."""
    paths = RunPaths(run_dir)
    if not paths.whitened_reference_checkpoint.is_file():
        return None
    state = load_checkpoint(paths.whitened_reference_checkpoint)
    model = restore_model(state, cfg, paths.run_dir).to(resolve_device("auto"))
    reports = json.loads(paths.whitening_report.read_text()) if paths.whitening_report.is_file() else {}
    report = reports.get("reference", reports.get("model", {}))
    details = {key: report.get(key) for key in ("method", "dim", "bits", "itq", "shrinkage", "fit_images")}
    name = f"{reference_name(cfg.model)} + whitening"
    return ReferenceRow(name, exact_metrics(_embedded(model, cfg, records), ks), details)


def _embedded(model: EmbeddingModel, cfg: TrainConfig, records: Sequence[ImageRecord]) -> EvalData:
    """``records``' embeddings under the run's eval transform, as the trainer embeds its test split (readable ones)."""
    device = next(model.parameters()).device
    loader = build_eval_loader(records, label_index(records), cfg, device)
    embeddings, _ = embed_loader(model, loader, device, Precision(False, torch.float32, False), False)
    dataset: ImageRecordDataset = loader.dataset  # type: ignore[assignment]
    keep = ~dataset.bad_mask()
    return EvalData.from_records([r for r, ok in zip(records, keep) if ok], embeddings[keep])


def _saved_reference_row(
    cfg: TrainConfig, paths: RunPaths, records: Sequence[ImageRecord], ks: Sequence[int]
) -> ReferenceRow:
    """The row of the reference model the trainer saved, embedded as the trainer embeds its test split."""
    state = load_checkpoint(paths.reference_checkpoint)
    model = restore_model(state, cfg, paths.run_dir).to(resolve_device("auto"))
    data = _embedded(model, cfg, records)
    model_config = state.get("model_config") or {}
    details = {
        "name": reference_name(cfg.model),
        "feature_dim": model.feature_dim,
        "dim": model.embedding_dim,
        "reduction": "pca" if model.embedding_dim < model.feature_dim else "centred",
        "fit_images": "the run's training split",
        **({"reduction": "tower projection", "fit_images": 0} if has_tower_embedding(cfg.model) else {}),
        "backbone": model_config.get("backbone", cfg.model.backbone),
        "weights": cfg.model.pretrained,
    }
    return ReferenceRow(reference_name(cfg.model), exact_metrics(data, ks), details)
