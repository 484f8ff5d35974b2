"""Validation and test metrics of an ensemble's joined embedding, next to each member's own.

Each member's best checkpoint embeds the validation and test images (one member in memory at a
time); the embeddings are joined (``join_embeddings``: normalised, concatenated, normalised) and
evaluated with the protocol every other number in the project uses (``split_metrics``). The test
split is evaluated once, after all members were chosen on validation; it chooses nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.data_loaders import build_eval_loader
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset
from retrieval.training.data_pipeline.run_data import prepare_run_data
from retrieval.training.model.device import resolve_device, resolve_precision
from retrieval.training.model.ensemble_model import join_embeddings
from retrieval.training.run.inputs.embed import embed_loader
from retrieval.training.run.measures.split_metrics import SplitMetrics, split_metrics
from retrieval.training.run.outputs.run_model import load_run_model


def evaluate_ensemble(cfg: TrainConfig, member_dirs: Sequence[Path], *, progress: bool) -> dict[str, Any]:
    """``{"val": float metrics or None, "test": {"float", "binary", ...}, "member_embedding_dims": [...]}``."""
    device = resolve_device(cfg.trainer.device)
    precision = resolve_precision(device, cfg.trainer.amp)
    ungrouped = cfg.data.model_copy(update={"meta_classes": None})  # evaluation uses the true classes
    data = prepare_run_data(ungrouped, progress=progress)
    loaders = {"test": build_eval_loader(data.splits.test, data.eval_label_index, cfg, device)}
    if data.splits.val:
        loaders["val"] = build_eval_loader(data.splits.val, data.eval_label_index, cfg, device)
    embeddings: dict[str, list[np.ndarray]] = {name: [] for name in loaders}
    labels: dict[str, np.ndarray] = {}
    dims = []
    for member_dir in member_dirs:
        _, _, model = load_run_model(member_dir)
        model.to(device)
        if cfg.model.channels_last:
            model.to(memory_format=torch.channels_last)
        dims.append(model.embedding_dim)
        for name, loader in loaders.items():
            member_embeddings, labels[name] = embed_loader(model, loader, device, precision, cfg.model.channels_last)
            embeddings[name].append(member_embeddings)
    test = _joined_metrics(embeddings["test"], labels["test"], loaders["test"], cfg, test=True).to_dict()
    test.update(num_test_classes=len(data.splits.test_classes), num_test_images=len(data.splits.test))
    val = None
    if "val" in loaders:
        val = _joined_metrics(embeddings["val"], labels["val"], loaders["val"], cfg, test=False).validation_dict()
    return {"val": val, "test": test, "member_embedding_dims": dims}


def _joined_metrics(
    members: list[np.ndarray], labels: np.ndarray, loader: DataLoader, cfg: TrainConfig, *, test: bool
) -> SplitMetrics:
    """As the trainer evaluates: validation in float only, test in float and binary with NMI."""
    dataset: ImageRecordDataset = loader.dataset  # type: ignore[assignment]
    kinds = ("float", "binary") if test else ("float",)
    joined = join_embeddings(members)
    return split_metrics(joined, labels, dataset, kinds=kinds, ks=cfg.trainer.recall_ks, compute_nmi=test)
