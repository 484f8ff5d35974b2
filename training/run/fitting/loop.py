"""The core every training loop shares: one optimisation step, and the choice of the best epoch.

``OptimizationStep`` turns a loss into an update: it stops on a NaN or infinite loss (the last good
checkpoint stays), scales for mixed precision, clips the gradient norm, steps the optimizer and the
schedule. ``EpochSelection`` keeps the epoch with the best validation MAP@R (epoch 0, the starting
model, is a candidate like any other) and counts the epochs since, for early stopping. The trainer
(``trainer``) and the study's head training on cached features (``study.head_training``) both use
them, so both stop, clip and choose alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from retrieval.indexing.common.errors import RetrievalError


class TrainingDiverged(RetrievalError):
    """The loss became NaN or infinite."""


class OptimizationStep:
    """``step(loss, ...)``: check, backward, clip, step the optimizer and the per-step schedule."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        *,
        grad_clip_norm: float | None,
        scaler: torch.amp.GradScaler | None = None,
        before_update: Callable[[], None] = lambda: None,
        advice: str = "",
    ) -> None:
        """``before_update`` runs after backward and before clipping (the distributed trainer averages the
        loss parameters' gradients there); ``advice`` ends the divergence message (what the user can do)."""
        self.optimizer, self.scheduler, self.grad_clip_norm = optimizer, scheduler, grad_clip_norm
        self.advice = advice
        self.scaler = scaler or torch.amp.GradScaler("cpu", enabled=False)
        self.before_update = before_update
        self.clipped = [p for group in optimizer.param_groups for p in group["params"]]

    def __call__(self, loss: torch.Tensor, *, where: str, scale: float = 1.0) -> float:
        """Apply ``loss`` (times ``scale``, e.g. the global-batch share of a rank); its value as a float.

        ``where`` names the step for the divergence message, e.g. "epoch 3, step 12"."""
        value = float(loss.detach().item())
        if not torch.isfinite(loss):
            raise TrainingDiverged(f"the loss became {value} at {where}" + (f"; {self.advice}" if self.advice else ""))
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss * scale).backward()
        self.before_update()
        if self.grad_clip_norm:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.clipped, self.grad_clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        return value


@dataclass
class EpochSelection:
    """The best epoch by validation MAP@R so far, and how many epochs have not beaten it."""

    best_score: float = -1.0
    best_epoch: int = -1
    stale_epochs: int = 0

    def record(self, epoch: int, score: float) -> bool:
        """Whether ``epoch`` (``score``: its validation MAP@R) is the new best; ties keep the earlier epoch."""
        if score > self.best_score:
            self.best_score, self.best_epoch, self.stale_epochs = score, epoch, 0
            return True
        self.stale_epochs += 1
        return False

    def should_stop(self, patience: int | None) -> bool:
        return patience is not None and self.stale_epochs >= patience


def batches_of(items: Iterable, steps: int) -> Iterable:
    """At most ``steps`` items of ``items`` (an epoch capped by ``trainer.max_steps_per_epoch``)."""
    for step, item in enumerate(items):
        if step >= steps:
            return
        yield item
