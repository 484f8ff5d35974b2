"""The trainer's checkpoints: the state a checkpoint holds, saving it each epoch, and resuming from one."""

from __future__ import annotations

import logging
from typing import Any

import torch

from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.run.fitting.distributed import barrier
from retrieval.training.run.fitting.loop import EpochSelection
from retrieval.training.run.fitting.optim import build_scheduler
from retrieval.training.run.fitting.trainer_parts import TrainerParts
from retrieval.training.run.measures.reference import reference_model_config
from retrieval.training.run.measures.split_metrics import SplitMetrics
from retrieval.training.run.outputs.run_dir import Checkpoint, save_checkpoint

log = logging.getLogger(__name__)


class TrainerCheckpoints(TrainerParts):
    """The checkpoints of ``Trainer``: what one holds, when it is written, how a run resumes."""

    # ---- persistence --------------------------------------------------------------------
    def _state(self, epoch: int, val: SplitMetrics | None, model: EmbeddingModel | None = None) -> Checkpoint:
        """A checkpoint of the training model, or of ``model`` (the reference: its own model section)."""
        saved = model if model is not None else self.model
        model_config = self.cfg.model
        if model is not None:
            model_config = reference_model_config(self.cfg.model, model.embedding_dim)
        return {
            "model": saved.state_dict(),
            "model_config": model_config.model_dump(mode="json"),
            "loss": self.loss.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "epoch": epoch,
            "global_step": self.global_step,
            "world_size": self.ctx.world_size,
            "steps_per_epoch": self.steps_per_epoch,
            "best_map_at_r": self.selection.best_score,
            "best_epoch": self.selection.best_epoch,
            "stale_epochs": self.selection.stale_epochs,
            "val_metrics": val.validation_dict() if val else {},
            "val_query_ap": _query_ap(val),
            "num_classes": self.data.num_train_labels,
            "config": self.cfg.model_dump(mode="json"),
            "loss_name": self.cfg.loss.name,
            "training_classes": self.data.splits.train_classes + self.data.splits.val_classes,
        }

    def _save(self, epoch: int, val: SplitMetrics | None, improved: bool) -> None:
        if self.ctx.is_main:
            state = self._state(epoch, val)
            save_checkpoint(self.paths.last_checkpoint, state)
            if improved:
                save_checkpoint(self.paths.best_checkpoint, state)
        barrier(self.ctx)

    def _restore(self, state: dict[str, Any]) -> int:
        self.model.load_state_dict(state["model"])
        self.loss.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.global_step = state["global_step"]
        self.selection = EpochSelection(state["best_map_at_r"], state["best_epoch"], state.get("stale_epochs", 0))
        epoch = int(state["epoch"])
        self._follow_new_steps_per_epoch(epoch, state.get("steps_per_epoch", self.global_step // max(1, epoch)))
        log.info("resumed from %s after epoch %d", self.paths.last_checkpoint, epoch)
        return epoch

    def _follow_new_steps_per_epoch(self, epoch: int, saved_steps_per_epoch: int) -> None:
        """Resuming with another number of processes (the batch is per rank) or batch size changes the
        steps per epoch: the schedule then restarts at epoch ``epoch``'s end of the new step count, so it
        still ends with the last epoch (the old step count would leave it early or late)."""
        if saved_steps_per_epoch == self.steps_per_epoch:
            return
        log.info(
            "steps per epoch changed from %d to %d (world size %d): the schedule continues by epochs",
            saved_steps_per_epoch,
            self.steps_per_epoch,
            self.ctx.world_size,
        )
        self.scheduler = build_scheduler(
            self.optimizer,
            self.cfg.schedule,
            steps_per_epoch=self.steps_per_epoch,
            epochs=self.cfg.trainer.epochs,
            start_step=epoch * self.steps_per_epoch,
        )
        self.optimization.scheduler = self.scheduler


def _query_ap(val: SplitMetrics | None) -> torch.Tensor | None:
    """A checkpoint's per-query validation AP (``val_query_ap``), which the verdict's interval resamples."""
    query_ap = val.float_metrics.query_ap if val is not None else None
    return torch.from_numpy(query_ap) if query_ap is not None else None
