"""The loss, the sampler kind and the capped steps of an epoch, from a ``TrainConfig``: the one factory that
the trainer and the study (its configs and its cached-feature head training) share."""

from __future__ import annotations

from retrieval.training.config.train_config import TrainConfig
from retrieval.training.losses import build_loss, get_loss_spec
from retrieval.training.losses.base import EmbeddingLoss, Sampler


def loss_from_config(cfg: TrainConfig, *, num_classes: int, embedding_dim: int) -> EmbeddingLoss:
    """A fresh loss of ``cfg.loss`` (name, parameters, miner) for ``num_classes`` classes of embeddings of
    ``embedding_dim``; its parameters are drawn from torch's current random state."""
    return build_loss(
        cfg.loss.name,
        num_classes=num_classes,
        embedding_dim=embedding_dim,
        params=cfg.loss.params,
        miner=cfg.loss.miner or "default",
        miner_params=cfg.loss.miner_params,
    )


def sampler_kind(cfg: TrainConfig) -> Sampler:
    """``data.sampler``, where "auto" is the loss's own: class-balanced C x M for pair losses, plain shuffling
    for classification losses."""
    chosen = cfg.data.sampler
    return get_loss_spec(cfg.loss.name).sampler if chosen == "auto" else chosen


def capped_steps(batches: int, cfg: TrainConfig) -> int:
    """The steps of one epoch of ``batches`` batches, at most ``trainer.max_steps_per_epoch`` (quick runs)."""
    cap = cfg.trainer.max_steps_per_epoch
    return min(batches, cap) if cap else batches
