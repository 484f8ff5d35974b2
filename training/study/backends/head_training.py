"""Train only the new layers and the loss on cached backbone features (``--cached-features``).

The head is the full model's new layers over the pooled features (``EmbeddingModel`` with an
identity backbone: optional LayerNorm without affine, linear to ``model.embedding_dim``, L2
normalisation), so its weights have the same names as in a full model. Batches come from the
trainer's samplers (class-balanced C x M or shuffled), the optimizer, parameter groups and
schedule from the trainer's builders; validation MAP@R after each epoch picks the best epoch, and
``trainer.patience`` stops early. No augmentation: every epoch sees the same features.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.eval.metrics import RetrievalMetrics
from retrieval.training.config.loss_and_sampler import capped_steps, loss_from_config, sampler_kind
from retrieval.training.config.train_config import ModelConfig, TrainConfig
from retrieval.training.data_pipeline.data_loaders import train_batch_sampler
from retrieval.training.model.device import resolve_device
from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.run.fitting.loop import EpochSelection, OptimizationStep, batches_of
from retrieval.training.run.fitting.optim import build_optimizer, build_scheduler, parameter_groups
from retrieval.training.study.backends.study_evaluation import EvalSet, metrics

EMBED_BATCH = 4096


@dataclass(frozen=True)
class HeadFit:
    state: dict[str, torch.Tensor]  # the head at its best validation epoch (CPU tensors)
    best_epoch: int
    val: RetrievalMetrics  # float validation metrics at best_epoch
    untrained_val: RetrievalMetrics  # the same for the freshly initialised head (epoch 0)
    epochs: int  # epochs trained (fewer than trainer.epochs after early stopping)


def build_head(cfg: ModelConfig, feature_dim: int) -> EmbeddingModel:
    """The new layers of the full model over pooled features of shape (B, F, 1, 1)."""
    if cfg.embedding_dim is None:
        raise ConfigError("--cached-features trains a linear head; set --embedding-dim (model.embedding_dim)")
    return EmbeddingModel(
        nn.Identity(),
        feature_dim,
        backbone_name=cfg.backbone,
        pooling="avg",
        layer_norm=cfg.layer_norm,
        embedding_dim=cfg.embedding_dim,
    )


@torch.no_grad()
def embed_features(head: EmbeddingModel, features: np.ndarray) -> np.ndarray:
    """Unit-norm embeddings (N, D) of pooled features (N, F)."""
    head.eval()
    device = next(head.parameters()).device
    chunks = [
        head(torch.from_numpy(features[start : start + EMBED_BATCH]).to(device)[..., None, None]).cpu()
        for start in range(0, len(features), EMBED_BATCH)
    ]
    return torch.cat(chunks).numpy()


@contextmanager
def one_thread() -> Iterator[None]:
    """The head's small matrices run faster on one CPU thread than on several that wait for each other
    (4-10x on a busy 2-core machine); the previous thread count is restored afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def fit_head(
    cfg: TrainConfig, train_x: np.ndarray, train_labels: Sequence[str], val_x: np.ndarray, val_set: EvalSet
) -> HeadFit:
    """Train head + loss on (``train_x``, ``train_labels``); keep the epoch with the best validation MAP@R."""
    with one_thread():
        return _fit_head(cfg, train_x, train_labels, val_x, val_set)


def _fit_head(
    cfg: TrainConfig, train_x: np.ndarray, train_labels: Sequence[str], val_x: np.ndarray, val_set: EvalSet
) -> HeadFit:
    if cfg.data.meta_classes is not None:
        raise ConfigError("--cached-features does not support data.meta_classes (DREML); leave it unset")
    torch.manual_seed(cfg.trainer.seed)
    device = resolve_device(cfg.trainer.device)
    index = {label: i for i, label in enumerate(sorted(set(train_labels)))}
    labels = torch.tensor([index[label] for label in train_labels], device=device)
    inputs = torch.from_numpy(np.ascontiguousarray(train_x)).to(device)[..., None, None]
    head = build_head(cfg.model, train_x.shape[1]).to(device)
    loss = loss_from_config(cfg, num_classes=len(index), embedding_dim=head.embedding_dim).to(device)
    sampler = train_batch_sampler(labels.tolist(), index, cfg, sampler_kind(cfg))
    steps = capped_steps(len(sampler), cfg)
    optimizer = build_optimizer(parameter_groups(head, loss, cfg), cfg.optimizer)
    scheduler = build_scheduler(optimizer, cfg.schedule, steps_per_epoch=steps, epochs=cfg.trainer.epochs)
    step = OptimizationStep(optimizer, scheduler, grad_clip_norm=cfg.optimizer.grad_clip_norm)
    untrained = metrics(embed_features(head, val_x), val_set)
    selection, best_state, best_val, epoch = EpochSelection(), {}, untrained, 0
    for epoch in range(1, cfg.trainer.epochs + 1):
        sampler.set_epoch(epoch)
        head.train()
        for number, batch in enumerate(batches_of(sampler, steps), start=1):
            rows = torch.as_tensor(batch, device=device)
            step(loss(head(inputs[rows]), labels[rows]), where=f"epoch {epoch}, step {number}")
        val = metrics(embed_features(head, val_x), val_set)
        if selection.record(epoch, val.map_at_r):
            best_state = {key: tensor.detach().cpu().clone() for key, tensor in head.state_dict().items()}
            best_val = val
        elif selection.should_stop(cfg.trainer.patience):
            break
    return HeadFit(
        state=best_state, best_epoch=selection.best_epoch, val=best_val, untrained_val=untrained, epochs=epoch
    )


def restore_head(cfg: ModelConfig, feature_dim: int, fit: HeadFit) -> EmbeddingModel:
    """The head of ``fit`` at its best epoch, on the CPU."""
    head = build_head(cfg, feature_dim)
    head.load_state_dict(copy.deepcopy(fit.state))
    return head
