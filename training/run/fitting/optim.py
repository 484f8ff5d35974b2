"""Optimizer with separate parameter groups (backbone, new layers, loss parameters) and per-step schedules.

With ``optimizer.layer_decay`` d the backbone is one group per stage (``trunk_stages``: a ViT's embedding,
blocks and final norm), the last stage at ``optimizer.lr`` and each earlier one d times the next (BEiT's
layer-wise learning-rate decay, as DINOv2 and CLIP fine-tuning use it).

``OPTIMIZERS`` and ``SCHEDULES`` map the names of ``optimizer.name`` and ``schedule.name`` to code.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from retrieval.indexing.common.registry import Registry
from retrieval.training.config.train_config import OptimizerConfig, ScheduleConfig, TrainConfig
from retrieval.training.losses.base import EmbeddingLoss
from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.model.trunks.trunk_stages import trunk_stages

OptimizerBuilder = Callable[[list[dict], OptimizerConfig], torch.optim.Optimizer]
OPTIMIZERS: Registry[OptimizerBuilder] = Registry("optimizer")
OPTIMIZERS.register(
    "sgd", lambda groups, c: torch.optim.SGD(groups, lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay)
)
OPTIMIZERS.register("adam", lambda groups, c: torch.optim.Adam(groups, lr=c.lr, weight_decay=c.weight_decay))
OPTIMIZERS.register("adamw", lambda groups, c: torch.optim.AdamW(groups, lr=c.lr, weight_decay=c.weight_decay))
OPTIMIZERS.register(
    "rmsprop", lambda groups, c: torch.optim.RMSprop(groups, lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay)
)


def parameter_groups(model: EmbeddingModel, loss: EmbeddingLoss, cfg: TrainConfig) -> list[dict]:
    """Backbone at ``optimizer.lr``, new layers at ``head_lr``, loss parameters (proxies) at ``loss.lr``.

    Proxy-based losses train their proxies much faster than the network (Proxy-Anchor
    uses 100x); the loss parameters get no weight decay because shrinking proxies
    changes nothing for normalised proxies and fights unnormalised ones.
    """
    opt = cfg.optimizer
    groups = [
        *backbone_groups(model, opt.lr, opt.layer_decay),
        {"name": "head", "params": list(model.new_parameters()), "lr": opt.head_lr or opt.lr},
        {
            "name": "loss",
            "params": list(loss.loss_parameters()),
            "lr": cfg.loss.lr or opt.lr * 10,
            "weight_decay": 0.0,
        },
    ]
    return [group for group in groups if group["params"]]


def backbone_groups(model: EmbeddingModel, lr: float, layer_decay: float | None) -> list[dict]:
    """The backbone at ``lr``; with ``layer_decay``, one group per stage, the last first, each earlier stage's
    rate ``layer_decay`` times the next one's (parameters outside the stages stay at ``lr``)."""
    parameters = list(model.backbone_parameters())
    if layer_decay is None or not parameters:
        return [{"name": "backbone", "params": parameters, "lr": lr}]
    stages = trunk_stages(model.backbone)
    seen: set[int] = set()
    groups: list[dict[str, Any]] = []
    for depth, stage in enumerate(reversed(stages)):
        params = [p for p in stage.parameters() if id(p) not in seen]
        seen.update(id(p) for p in params)
        groups.append(
            {"name": f"backbone_stage{len(stages) - 1 - depth}", "params": params, "lr": lr * layer_decay**depth}
        )
    groups[0]["params"] += [p for p in parameters if id(p) not in seen]
    groups[0]["name"] = "backbone"
    return groups


def build_optimizer(groups: list[dict], cfg: OptimizerConfig) -> torch.optim.Optimizer:
    return OPTIMIZERS.get(cfg.name)(groups, cfg)


# (step, total_steps, steps_per_epoch, cfg) -> multiplier of the base learning rates, after warmup
ScheduleShape = Callable[[int, int, int, ScheduleConfig], float]


def _warmup_steps(cfg: ScheduleConfig, steps_per_epoch: int) -> int:
    return int(cfg.warmup_epochs * steps_per_epoch)


def _cosine(step: int, total_steps: int, steps_per_epoch: int, cfg: ScheduleConfig) -> float:
    """Half a cosine from 1 down to ``min_lr_ratio`` over the steps after warmup."""
    warmup = _warmup_steps(cfg, steps_per_epoch)
    progress = (step - warmup) / max(1, total_steps - warmup)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * cosine


def _step(step: int, total_steps: int, steps_per_epoch: int, cfg: ScheduleConfig) -> float:
    """Multiply by ``step_gamma`` every ``step_epochs`` epochs."""
    return cfg.step_gamma ** (step // (cfg.step_epochs * steps_per_epoch))


SCHEDULES: Registry[ScheduleShape] = Registry("schedule")
SCHEDULES.register("constant", lambda step, total_steps, steps_per_epoch, cfg: 1.0)
SCHEDULES.register("step", _step)
SCHEDULES.register("cosine", _cosine)


def lr_factor(step: int, *, total_steps: int, steps_per_epoch: int, cfg: ScheduleConfig) -> float:
    """Multiplier of every group's base learning rate at optimizer step ``step`` (0-based): linear warmup, then the shape."""
    shape = SCHEDULES.get(cfg.name)
    warmup = _warmup_steps(cfg, steps_per_epoch)
    if step < warmup:
        return (step + 1) / warmup
    return shape(step, total_steps, steps_per_epoch, cfg)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: ScheduleConfig, *, steps_per_epoch: int, epochs: int, start_step: int = 0
) -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule over ``epochs * steps_per_epoch`` steps, positioned at ``start_step`` (a resumed run
    whose steps per epoch changed; its optimizer's groups then hold ``initial_lr`` from the checkpoint)."""
    total = steps_per_epoch * epochs
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: lr_factor(step, total_steps=total, steps_per_epoch=steps_per_epoch, cfg=cfg),
        last_epoch=start_step - 1,
    )
