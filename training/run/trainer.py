"""The training loop: fit, validate on class-disjoint validation classes, keep the best, test once.

Model selection uses validation MAP@R only; the test split is embedded after training
ends (and, for reference, once before it starts) and never influences any choice.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import RetrievalError
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data.data_loaders import build_eval_loader, build_train_loader, set_loader_epoch
from retrieval.training.data.image_dataset import ImageRecordDataset
from retrieval.training.data.run_data import RunData, prepare_run_data
from retrieval.training.losses import build_loss, get_loss_spec
from retrieval.training.model.device import resolve_device, resolve_precision
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.model.pretrained import load_pretrained
from retrieval.training.run.curves import plot_curves
from retrieval.training.run.distributed import (
    DistContext,
    average_across_ranks,
    barrier,
    broadcast_from_main,
    gather_with_grad,
    global_batch_loss_scale,
    same_on_every_rank_seed,
    sync_loss_parameter_grads,
)
from retrieval.training.run.embed import embed_loader
from retrieval.training.run.optim import build_optimizer, build_scheduler, parameter_groups
from retrieval.training.run.reference import pretrained_reference, reference_name
from retrieval.training.run.run_dir import Checkpoint, RunPaths, load_checkpoint, save_checkpoint, write_run_config
from retrieval.training.run.run_summary import RunSetup, log_summary, training_rows
from retrieval.training.run.split_metrics import split_metrics
from retrieval.training.run.tracking import open_tracker

log = logging.getLogger(__name__)


class TrainingDiverged(RetrievalError):
    """The loss became NaN or infinite."""


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    epochs_completed: int
    best_epoch: int
    best_val: dict[str, Any] | None
    test: dict[str, Any]


class Trainer:
    def __init__(
        self,
        cfg: TrainConfig,
        run_dir: Path,
        *,
        resume: bool = False,
        progress: bool = True,
        ctx: DistContext | None = None,
        evaluate_test: bool = True,
        summary: bool = True,
    ) -> None:
        """``evaluate_test=False`` never embeds the test split (``retrieval study``'s fold runs, which
        evaluate the test classes themselves, once per chosen model); ``fit`` then returns ``test={}``.
        ``summary=False`` leaves out the start-of-run summary (``training.run_summary``)."""
        self.cfg, self.paths, self.resume = cfg, RunPaths(Path(run_dir)), resume
        self.evaluate_test, self.summary = evaluate_test, summary
        self.ctx = ctx or DistContext.single()
        self.progress = progress and self.ctx.is_main
        torch.manual_seed(cfg.trainer.seed + self.ctx.rank)
        self.device = resolve_device(cfg.trainer.device, self.ctx.local_rank)
        self.precision = resolve_precision(self.device, cfg.trainer.amp)
        get_loss_spec(cfg.loss.name)  # a misspelt loss fails here, not after scanning every image
        self.tracker = open_tracker(
            run_dir, enabled=cfg.trainer.tensorboard, main_process=self.ctx.is_main, resume=resume
        )  # likewise a missing tensorboard package
        self.data: RunData = prepare_run_data(cfg.data, progress=self.progress, grouping_seed=cfg.trainer.seed)
        self._build_model_and_loss()
        self._build_loaders()
        self._build_optimization()
        self.best_map, self.best_epoch, self.stale_epochs, self.global_step = -1.0, 0, 0, 0
        self.stop_check: Callable[[], None] = lambda: None

    # ---- construction -------------------------------------------------------------------
    def _build_model_and_loss(self) -> None:
        cfg = self.cfg
        self.spec = get_loss_spec(cfg.loss.name)
        self.model = build_embedding_model(cfg.model)
        if cfg.model.pretrained and not self.resume:
            report = load_pretrained(self.model, cfg.model.pretrained)
            log.info("pretrained weights: %s", report.summary())
        self.model.to(self.device)
        if cfg.model.channels_last:
            self.model.to(memory_format=torch.channels_last)
        with torch.random.fork_rng(devices=[]):  # the same proxies on every rank (the model is DDP-broadcast)
            torch.manual_seed(cfg.trainer.seed)
            self.loss = build_loss(
                cfg.loss.name,
                num_classes=self.data.num_train_labels,
                embedding_dim=self.model.embedding_dim,
                params=cfg.loss.params,
                miner=cfg.loss.miner or "default",
                miner_params=cfg.loss.miner_params,
            ).to(self.device)
        self.train_model: torch.nn.Module = self.model
        if self.ctx.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            # warm-start epochs freeze the backbone: its parameters then get no gradient
            unused = cfg.trainer.warm_start_epochs > 0
            self.train_model = DistributedDataParallel(self.model, device_ids=ids, find_unused_parameters=unused)

    def _build_loaders(self) -> None:
        cfg, splits = self.cfg, self.data.splits
        kind = self.spec.sampler if cfg.data.sampler == "auto" else cfg.data.sampler
        self.sampler_kind = kind
        self.train_loader = build_train_loader(
            splits.train,
            self.data.train_label_index,
            cfg,
            sampler_kind=kind,
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
            device=self.device,
        )
        index = self.data.eval_label_index
        self.val_loader = build_eval_loader(splits.val, index, cfg, self.device) if splits.val else None
        self.test_loader = build_eval_loader(splits.test, index, cfg, self.device)
        cap = cfg.trainer.max_steps_per_epoch
        self.steps_per_epoch = min(len(self.train_loader), cap) if cap else len(self.train_loader)

    def _build_optimization(self) -> None:
        cfg = self.cfg
        self.optimizer = build_optimizer(parameter_groups(self.model, self.loss, cfg), cfg.optimizer)
        self.scheduler = build_scheduler(
            self.optimizer, cfg.schedule, steps_per_epoch=self.steps_per_epoch, epochs=cfg.trainer.epochs
        )
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision.use_grad_scaler)
        self.clip_params = [p for g in self.optimizer.param_groups for p in g["params"]]

    # ---- the loop -------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        try:
            return self._fit()
        finally:
            self.tracker.close()

    def _fit(self) -> TrainResult:
        if self.summary and self.ctx.is_main:
            log_summary(training_rows(self.cfg, self.data, self._setup()))
        start_epoch = self._start()
        reference_test = self._reference_test() if start_epoch == 0 and self.evaluate_test else None
        epoch = start_epoch
        for epoch in range(start_epoch + 1, self.cfg.trainer.epochs + 1):
            self.model.set_backbone_trainable(epoch > self.cfg.trainer.warm_start_epochs)
            train_stats = self._train_epoch(epoch)
            val = broadcast_from_main(self._validate(), self.ctx)
            improved = self._record_selection(epoch, val)
            self._save(epoch, val, improved)
            self._log_epoch(epoch, train_stats, val)
            if self._should_stop():
                log.info("early stopping: no better validation MAP@R for %d epochs", self.stale_epochs)
                break
        if not self.evaluate_test:
            barrier(self.ctx)
            best_val = load_checkpoint(self.paths.best_checkpoint).get("val_metrics") if self.ctx.is_main else None
            return TrainResult(self.paths.run_dir, epoch, self.best_epoch, best_val or None, {})
        test, best_val = self._final_test(reference_test)
        return TrainResult(self.paths.run_dir, epoch, self.best_epoch, best_val, test)

    def _setup(self) -> RunSetup:
        return RunSetup(
            run_dir=self.paths.run_dir,
            device=self.device,
            precision=self.precision,
            sampler=self.sampler_kind,
            steps_per_epoch=self.steps_per_epoch,
            embedding_dim=self.model.embedding_dim,
            world_size=self.ctx.world_size,
            resuming=self.resume and self.paths.last_checkpoint.is_file(),
        )

    def _start(self) -> int:
        self.paths.run_dir.mkdir(parents=True, exist_ok=True)
        if self.ctx.is_main:  # what this run actually resolved, also when resuming with new options
            write_run_config(self.paths.run_dir, self.cfg)
        if self.resume and self.paths.last_checkpoint.is_file():
            return self._restore(load_checkpoint(self.paths.last_checkpoint))
        if self.resume:
            log.warning("--resume: no checkpoint in %s, starting from scratch", self.paths.checkpoints_dir)
        if self.ctx.is_main:
            atomic_write_text(self.paths.metrics, "")
            self._log_epoch(0, None, self._validate())
        return 0

    def _train_epoch(self, epoch: int) -> dict[str, float]:
        set_loader_epoch(self.train_loader, epoch)
        self.train_model.train()
        losses, images_seen, wait_s, started = [], 0, 0.0, time.perf_counter()
        bar = tqdm(
            total=self.steps_per_epoch,
            desc=f"epoch {epoch}/{self.cfg.trainer.epochs}",
            disable=not self.progress,
            unit="step",
            leave=False,
        )
        batches = iter(self.train_loader)
        for step in range(self.steps_per_epoch):
            t0 = time.perf_counter()
            images, labels, _ = next(batches)
            wait_s += time.perf_counter() - t0
            losses.append(self._step(images, labels, epoch, step))
            self.tracker.log_step(self.global_step, losses[-1], self.optimizer.param_groups)
            self.stop_check()  # a Ctrl-C takes effect here, between steps (training.interrupt)
            images_seen += len(images)
            rate = images_seen / (time.perf_counter() - started)
            bar.set_postfix(loss=f"{losses[-1]:.4f}", img_s=f"{rate:.1f}")
            bar.update()
        bar.close()
        elapsed = time.perf_counter() - started
        return {
            "train_loss": average_across_ranks(float(np.mean(losses)), self.ctx),
            "images_per_second": images_seen * self.ctx.world_size / elapsed,
            "data_wait_fraction": wait_s / elapsed,
            "lr": self.optimizer.param_groups[0]["lr"],
        }

    def _step(self, images: torch.Tensor, labels: torch.Tensor, epoch: int, step: int) -> float:
        images = images.to(self.device, non_blocking=True)
        labels = labels.to(self.device, non_blocking=True)
        if self.cfg.model.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.device.type, dtype=self.precision.dtype, enabled=self.precision.enabled):
            embeddings = self.train_model(images)
        embeddings = gather_with_grad(embeddings, self.ctx)  # every rank: the loss of the global batch
        labels = gather_with_grad(labels, self.ctx)
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(same_on_every_rank_seed(self.cfg.trainer.seed, self.global_step))
            loss = self.loss(embeddings.float(), labels)
        if not torch.isfinite(loss):
            raise TrainingDiverged(
                f"the loss became {loss.item()} at epoch {epoch}, step {step + 1}; training stopped and the last "
                f"good checkpoint is kept in {self.paths.checkpoints_dir} (lower the learning rate and --resume)"
            )
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss * global_batch_loss_scale(self.ctx)).backward()
        sync_loss_parameter_grads(self.loss.loss_parameters(), self.ctx)
        if self.cfg.optimizer.grad_clip_norm:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.clip_params, self.cfg.optimizer.grad_clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.global_step += 1
        return float(loss.item())

    # ---- evaluation and selection ---------------------------------------------------------
    def _evaluate(self, loader: DataLoader, *, kinds: tuple[str, ...], compute_nmi: bool) -> dict[str, Any]:
        """Metrics of a val/test loader under its records' query/gallery flags (``evaluate_retrieval``,
        as ``retrieval eval``); images found unreadable while embedding are left out and counted."""
        embeddings, labels = embed_loader(self.model, loader, self.device, self.precision, self.cfg.model.channels_last)
        dataset: ImageRecordDataset = loader.dataset  # type: ignore[assignment]
        split = "val" if loader is self.val_loader else "test"
        self.tracker.log_retrieval_grid(split, dataset, embeddings, self.global_step)
        return split_metrics(
            embeddings, labels, dataset, kinds=kinds, ks=self.cfg.trainer.recall_ks, compute_nmi=compute_nmi
        )

    def _validate(self) -> dict[str, Any] | None:
        if self.val_loader is None or not self.ctx.is_main:
            return None
        result = self._evaluate(self.val_loader, kinds=("float",), compute_nmi=False)
        return {**result["float"], "unreadable_images": result["unreadable_images"]}

    def _record_selection(self, epoch: int, val: dict[str, Any] | None) -> bool:
        """Best = highest validation MAP@R; without a validation split, the latest epoch."""
        score = val["map_at_r"] if val else float(epoch)
        if score > self.best_map:
            self.best_map, self.best_epoch, self.stale_epochs = score, epoch, 0
            return True
        self.stale_epochs += 1
        return False

    def _should_stop(self) -> bool:
        patience = self.cfg.trainer.patience
        return patience is not None and self.val_loader is not None and self.stale_epochs >= patience

    def _test_metrics(self) -> dict[str, Any]:
        return self._evaluate(self.test_loader, kinds=("float", "binary"), compute_nmi=True)

    def _reference_test(self) -> dict[str, Any] | None:
        """Test metrics of the starting backbone's pooled features (``training.reference``: "pretrained", or
        "untrained" without pretrained weights), kept on disk so a resumed run still reports them."""
        if not (self.cfg.trainer.evaluate_untrained_test and self.ctx.is_main):
            return None
        splits = self.data.splits
        with torch.random.fork_rng(devices=[]):  # the data loaders draw seeds; training must not depend on this
            reference = pretrained_reference(
                self.model,
                self.cfg,
                splits.test,
                splits.train + splits.val,  # the training half, as model.json's training_classes
                dim=self.model.embedding_dim,
                device=self.device,
                precision=self.precision,
            )
        metrics = split_metrics(
            reference.embeddings,
            reference.labels,
            reference.dataset,
            kinds=("float", "binary"),
            ks=self.cfg.trainer.recall_ks,
            compute_nmi=True,
        )
        metrics["reference"] = reference.details()
        atomic_write_text(self._reference_path, json.dumps(metrics, indent=2) + "\n")
        return metrics

    @property
    def _reference_path(self) -> Path:
        return self.paths.run_dir / "untrained_test_metrics.json"  # the name predates the "pretrained" row

    def _final_test(self, reference: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Test metrics of the best checkpoint, and that checkpoint's validation metrics."""
        barrier(self.ctx)
        if not self.ctx.is_main:
            return {}, None
        best = load_checkpoint(self.paths.best_checkpoint)
        self.model.load_state_dict(best["model"])
        result = {"best_epoch": best["epoch"], "split": "test", **self._test_metrics()}
        if reference is None and self._reference_path.is_file():
            reference = json.loads(self._reference_path.read_text())
        if reference is not None:  # the starting backbone's pooled features: "pretrained" or "untrained"
            result[reference_name(self.cfg.model)] = reference
        result["num_test_classes"] = len(self.data.splits.test_classes)
        result["num_test_images"] = len(self.data.splits.test)
        atomic_write_text(self.paths.test_metrics, json.dumps(result, indent=2) + "\n")
        return result, best.get("val_metrics")

    # ---- persistence --------------------------------------------------------------------
    def _state(self, epoch: int, val: dict[str, Any] | None) -> Checkpoint:
        return {
            "model": self.model.state_dict(),
            "loss": self.loss.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "epoch": epoch,
            "global_step": self.global_step,
            "world_size": self.ctx.world_size,
            "steps_per_epoch": self.steps_per_epoch,
            "best_map_at_r": self.best_map,
            "best_epoch": self.best_epoch,
            "stale_epochs": self.stale_epochs,
            "val_metrics": val or {},
            "num_classes": self.data.num_train_labels,
            "config": self.cfg.model_dump(mode="json"),
            "loss_name": self.cfg.loss.name,
            "training_classes": self.data.splits.train_classes + self.data.splits.val_classes,
        }

    def _save(self, epoch: int, val: dict[str, Any] | None, improved: bool) -> None:
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
        self.best_map, self.best_epoch = state["best_map_at_r"], state["best_epoch"]
        self.stale_epochs = state.get("stale_epochs", 0)
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

    def _log_epoch(self, epoch: int, stats: dict[str, float] | None, val: dict[str, Any] | None) -> None:
        if not self.ctx.is_main:
            return
        row: dict[str, Any] = {"epoch": epoch, "global_step": self.global_step, **(stats or {"train_loss": None})}
        row["val"] = val
        with open(self.paths.metrics, "a") as handle:
            handle.write(json.dumps(row) + "\n")
        self.tracker.log_epoch(row)
        title = f"{self.cfg.loss.name} / {self.cfg.model.backbone}"
        plot_curves(self.paths.metrics, self.paths.curves, title=title, best_epoch=self.best_epoch)
        if epoch and self.progress and stats:
            shown = f"val MAP@R {val['map_at_r']:.4f} P@1 {val['precision_at_1']:.4f}" if val else "no validation"
            tqdm.write(
                f"epoch {epoch}: loss {stats['train_loss']:.4f}  {shown}  ({stats['images_per_second']:.1f} img/s)"
            )
