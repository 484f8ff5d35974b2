"""The reference column of ``retrieval eval --model``: the run's starting backbone on the same images.

The backbone is rebuilt from the run's ``config.yaml``: its pretrained weights (``model.pretrained``),
or, for a run trained from random weights, the random initialisation the trainer drew with the same
seed. ``training.reference`` turns its pooled features into embeddings; they are measured with the
same function and protocol as the exported model's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.evaluation import EvalData, ReferenceRow, exact_metrics
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.model.device import Precision, resolve_device
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model
from retrieval.training.model.pretrained import load_pretrained
from retrieval.training.run.reference import pretrained_reference

log = logging.getLogger(__name__)


def starting_model(cfg: TrainConfig) -> EmbeddingModel:
    """The run's model before training: pretrained weights loaded, or the trainer's seeded random ones."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.trainer.seed)  # as the trainer (rank 0) seeds before building its model
        model = build_embedding_model(cfg.model)
    if cfg.model.pretrained:
        log.info("reference weights: %s", load_pretrained(model, cfg.model.pretrained).summary())
    return model


def reference_row(
    cfg: TrainConfig,
    records: Sequence[ImageRecord],
    train_records: Sequence[ImageRecord],
    *,
    dim: int,
    ks: Sequence[int],
) -> ReferenceRow:
    """Float and binary metrics of the reference embeddings of ``records`` (fitted on ``train_records``)."""
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
