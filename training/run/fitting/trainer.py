"""The training loop: fit, validate on class-disjoint validation classes, keep the best, test once.

Model selection uses validation MAP@R only. Epoch 0 is the starting model as the reference row
defines it (``reference``: the backbone's pooled features, centred or reduced by PCA on training
images), and it is a candidate like every trained epoch: a run whose training never beats it keeps
it, and says so (``verdict``); a trained epoch replaces it only when its validation gain is above the noise
of the validation queries (``verdict.beats_reference``), else epoch 0 is the run's model. The test split is embedded after training ends, for the chosen model
and the reference, and never influences any choice.

Where a step's inputs come from is ``train_batches``' business: images, or with frozen first stages
(``model.frozen_stages``) their activations, made per step or cached once (``trainer.cached_views``).
The step itself, clipping and the divergence stop are ``loop.OptimizationStep``; the choice of the
best epoch and early stopping ``loop.EpochSelection``. With ``whitening`` set, the chosen model and the
reference each get the whitening stage (``whitening_stage``) before the test: the run's model is then
the whitened one, and the test reports the reference, the reference + whitening and the model.
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
from tqdm import tqdm

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.exported_model.training_verdict import DataCopies
from retrieval.training.config.hub_access import model_hub_access
from retrieval.training.config.loss_and_sampler import capped_steps, loss_from_config, sampler_kind
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.data_loaders import build_train_loader, train_batch_sampler
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset
from retrieval.training.data_pipeline.run_data import RunData, prepare_run_data
from retrieval.training.data_pipeline.transforms import build_train_transform
from retrieval.training.losses import get_loss_spec
from retrieval.training.model.device import resolve_device, resolve_precision
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.model.pretrained import load_pretrained
from retrieval.training.run.fitting.distributed import (
    DistContext,
    average_across_ranks,
    barrier,
    broadcast_from_main,
    gather_with_grad,
    global_batch_loss_scale,
    same_on_every_rank_seed,
    sync_loss_parameter_grads,
)
from retrieval.training.run.fitting.loop import EpochSelection, OptimizationStep, TrainingDiverged
from retrieval.training.run.fitting.optim import build_optimizer, build_scheduler, parameter_groups
from retrieval.training.run.fitting.train_batches import CachedBatches, ImageBatches, PrefixBatches, TrainBatches
from retrieval.training.run.fitting.trainer_checkpoints import TrainerCheckpoints
from retrieval.training.run.fitting.trainer_tests import TrainerTests
from retrieval.training.run.inputs.activation_cache import ActivationCache, check_cache_size, repeated_transform
from retrieval.training.run.inputs.frozen_prefix import FrozenPrefix
from retrieval.training.run.inputs.split_inputs import SplitInputs
from retrieval.training.run.measures.reference import (
    reference_name,
)
from retrieval.training.run.measures.run_summary import RunSetup, log_summary, training_rows
from retrieval.training.run.measures.split_metrics import SplitMetrics
from retrieval.training.run.outputs.curves import plot_curves
from retrieval.training.run.outputs.run_dir import (
    RunPaths,
    load_checkpoint,
    save_checkpoint,
    write_run_config,
)
from retrieval.training.run.outputs.tracking import open_tracker

log = logging.getLogger(__name__)
__all__ = ["TrainResult", "Trainer", "TrainingDiverged"]


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    epochs_completed: int
    best_epoch: int
    best_val: dict[str, Any] | None
    test: dict[str, Any]
    data_copies: DataCopies | None = None  # the exact copies among the run's images (RunData.copies)


class Trainer(TrainerTests, TrainerCheckpoints):
    """Fit, validate, keep the best, test once; the measuring part is ``TrainerTests``, the checkpoints
    ``TrainerCheckpoints``."""

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
        if cfg.data.exclude is not None and self.ctx.is_main:
            self.paths.run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.paths.excluded, "".join(f"{path}\n" for path in self.data.excluded))
        self._build_model_and_loss()
        self._build_inputs()
        self._build_optimization()
        self.selection, self.global_step = EpochSelection(), 0
        self.candidate_epoch: int | None = None  # the best epoch by validation MAP@R, before the noise check
        self.stop_check: Callable[[], None] = lambda: None

    # ---- construction -------------------------------------------------------------------
    def _build_model_and_loss(self) -> None:
        cfg = self.cfg
        self.model = build_embedding_model(cfg.model, image_size=cfg.data.image_size)
        if cfg.model.pretrained and not self.resume:
            report = load_pretrained(self.model, cfg.model.pretrained, model_hub_access(cfg.model))
            log.info("pretrained weights: %s", report.summary())
        self.model.to(self.device)
        if cfg.model.channels_last:
            self.model.to(memory_format=torch.channels_last)
        self.prefix = FrozenPrefix(self.model, self.device) if self.model.frozen_stages else None
        with torch.random.fork_rng(devices=[]):  # the same proxies on every rank (the model is DDP-broadcast)
            torch.manual_seed(cfg.trainer.seed)
            self.loss = loss_from_config(
                cfg, num_classes=self.data.num_train_labels, embedding_dim=self.model.embedding_dim
            ).to(self.device)
        self.train_model: torch.nn.Module = self.model
        if self.ctx.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            # warm-start epochs freeze the backbone: its parameters then get no gradient
            unused = cfg.trainer.warm_start_epochs > 0
            self.train_model = DistributedDataParallel(self.model, device_ids=ids, find_unused_parameters=unused)

    def _build_inputs(self) -> None:
        cfg, splits = self.cfg, self.data.splits
        self.sampler_kind = sampler_kind(cfg)
        self.train_batches = self._train_batches()
        self.steps_per_epoch = self.train_batches.steps_per_epoch
        index, device, precision = self.data.eval_label_index, self.device, self.precision
        self.val_inputs = SplitInputs(splits.val, index, cfg, device, precision, self.prefix) if splits.val else None
        self.test_inputs = SplitInputs(splits.test, index, cfg, device, precision, self.prefix) if splits.test else None

    def _train_batches(self) -> TrainBatches:
        cfg, records, index = self.cfg, self.data.splits.train, self.data.train_label_index
        if self.prefix is not None and cfg.trainer.cached_views:
            views = cfg.trainer.cached_views
            dataset = ImageRecordDataset(
                records, index, repeated_transform(build_train_transform(cfg.data, cfg.model.backbone), views)
            )
            check_cache_size(len(dataset), views, self._prefix_shape(), cfg.trainer.cache_max_gb)
            sampler = train_batch_sampler(
                dataset.labels, index, cfg, self.sampler_kind, self.ctx.rank, self.ctx.world_size
            )
            steps = capped_steps(len(sampler), cfg)
            self._cache_dataset = dataset
            return CachedBatches(None, dataset.labels, sampler, steps, self.model.frozen_stages)
        loader = build_train_loader(
            records,
            index,
            cfg,
            sampler_kind=self.sampler_kind,
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
            device=self.device,
        )
        steps = capped_steps(len(loader), cfg)
        return PrefixBatches(loader, steps, self.prefix) if self.prefix else ImageBatches(loader, steps)

    def _prefix_shape(self) -> tuple[int, ...]:
        size = self.cfg.data.image_size
        with torch.no_grad():
            return tuple(self.model.prefix(torch.zeros(1, 3, size, size, device=self.device)).shape[1:])

    def _build_optimization(self) -> None:
        cfg = self.cfg
        self.optimizer = build_optimizer(parameter_groups(self.model, self.loss, cfg), cfg.optimizer)
        self.scheduler = build_scheduler(
            self.optimizer, cfg.schedule, steps_per_epoch=self.steps_per_epoch, epochs=max(1, cfg.trainer.epochs)
        )
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision.use_grad_scaler)
        self.optimization = OptimizationStep(
            self.optimizer,
            self.scheduler,
            grad_clip_norm=cfg.optimizer.grad_clip_norm,
            scaler=self.scaler,
            before_update=lambda: sync_loss_parameter_grads(self.loss.loss_parameters(), self.ctx),
            advice=f"training stopped and the last good checkpoint is kept in {self.paths.checkpoints_dir} "
            "(lower the learning rate and --resume)",
        )

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
        epoch = start_epoch
        for epoch in range(start_epoch + 1, self.cfg.trainer.epochs + 1):
            self._prepare_inputs()
            self.model.set_backbone_trainable(epoch > self.cfg.trainer.warm_start_epochs)
            train_stats = self._train_epoch(epoch)
            val = broadcast_from_main(self._validate(self.model), self.ctx)
            improved = self._record_selection(epoch, val)
            self._save(epoch, val, improved)
            self._log_epoch(epoch, train_stats, val)
            if self.selection.should_stop(self.cfg.trainer.patience if self.val_inputs is not None else None):
                log.info("early stopping: no better validation MAP@R for %d epochs", self.selection.stale_epochs)
                break
        settled = (self._settle_selection(), self.selection.best_epoch)
        validation_gain, self.selection.best_epoch = broadcast_from_main(settled, self.ctx)
        self._whitening_stage()
        if not self.evaluate_test or self.test_inputs is None:  # no test classes: data.split none
            barrier(self.ctx)
            best_val = load_checkpoint(self.paths.best_checkpoint).get("val_metrics") if self.ctx.is_main else None
            return TrainResult(
                self.paths.run_dir, epoch, self.selection.best_epoch, best_val or None, {}, self.data.copies
            )
        test, best_val = self._final_test(validation_gain)
        return TrainResult(self.paths.run_dir, epoch, self.selection.best_epoch, best_val, test, self.data.copies)

    def _setup(self) -> RunSetup:
        return RunSetup(
            run_dir=self.paths.run_dir,
            device=self.device,
            precision=self.precision,
            sampler=self.sampler_kind,
            steps_per_epoch=self.steps_per_epoch,
            embedding_dim=self.model.embedding_dim,
            reference_dim=min(self.model.feature_dim, self.model.embedding_dim),
            world_size=self.ctx.world_size,
            resuming=self.resume and self.paths.last_checkpoint.is_file(),
        )

    def _start(self) -> int:
        """Epoch 0: the reference model, validated, saved as the first best candidate (or a resumed run's epoch)."""
        self.paths.run_dir.mkdir(parents=True, exist_ok=True)
        if self.ctx.is_main:  # what this run actually resolved, also when resuming with new options
            write_run_config(self.paths.run_dir, self.cfg)
        if self.resume and self.paths.last_checkpoint.is_file():
            return self._restore(load_checkpoint(self.paths.last_checkpoint))
        if self.resume:
            log.warning("--resume: no checkpoint in %s, starting from scratch", self.paths.checkpoints_dir)
        val, candidate = None, self.cfg.trainer.select_reference or self.cfg.trainer.epochs == 0
        if self.ctx.is_main:
            atomic_write_text(self.paths.metrics, "")
            if self.progress:  # the reference is fitted and validated before any bar: say so meanwhile
                tqdm.write(f"epoch 0: measuring the {reference_name(self.cfg.model)} backbone (the reference) ...")
            reference = self._reference_model()
            val = self._validate(reference)
            state = self._state(0, val, reference)
            save_checkpoint(self.paths.reference_checkpoint, state)
            if candidate:
                save_checkpoint(self.paths.best_checkpoint, state)
        val = broadcast_from_main(val, self.ctx)
        if candidate:
            self._record_selection(0, val)
        self._log_epoch(0, None, val)
        barrier(self.ctx)
        return 0

    def _prepare_inputs(self) -> None:
        """Make the activation cache before the first trained epoch (``trainer.cached_views``)."""
        batches = self.train_batches
        if isinstance(batches, CachedBatches) and batches.cache is None:
            assert self.prefix is not None
            started = time.perf_counter()
            batches.cache = ActivationCache.build(
                self._cache_dataset,
                self.prefix,
                views=self.cfg.trainer.cached_views or 1,
                seed=same_on_every_rank_seed(self.cfg.trainer.seed, 0),
                workers=self.cfg.data.num_workers,
                progress=self.progress,
            )
            log.info(
                "activation cache: %d images x %d views, %.2f GB in %.0f s",
                len(batches.cache.activations),
                batches.cache.views,
                batches.cache.nbytes / 1e9,
                time.perf_counter() - started,
            )

    def _train_epoch(self, epoch: int) -> dict[str, float]:
        self.train_model.train()
        losses, images_seen, wait_s, started = [], 0, 0.0, time.perf_counter()
        bar = tqdm(
            total=self.steps_per_epoch,
            desc=f"epoch {epoch}/{self.cfg.trainer.epochs}",
            disable=not self.progress,
            unit="step",
            leave=False,
        )
        batches = self.train_batches.epoch(epoch)
        for step in range(self.steps_per_epoch):
            t0 = time.perf_counter()
            inputs, labels = next(batches)
            wait_s += time.perf_counter() - t0
            losses.append(self._step(inputs, labels, epoch, step))
            self.tracker.log_step(self.global_step, losses[-1], self.optimizer.param_groups)
            self.stop_check()  # a Ctrl-C takes effect here, between steps (training.interrupt)
            images_seen += len(inputs)
            bar.set_postfix(loss=f"{losses[-1]:.4f}", img_s=f"{images_seen / (time.perf_counter() - started):.1f}")
            bar.update()
        bar.close()
        elapsed = time.perf_counter() - started
        return {
            "train_loss": average_across_ranks(float(np.mean(losses)), self.ctx),
            "images_per_second": images_seen * self.ctx.world_size / elapsed,
            "data_wait_fraction": wait_s / elapsed,
            "lr": self.optimizer.param_groups[0]["lr"],
        }

    def _step(self, inputs: torch.Tensor, labels: torch.Tensor, epoch: int, step: int) -> float:
        inputs = inputs.to(self.device, non_blocking=True)
        labels = labels.to(self.device, non_blocking=True)
        if self.cfg.model.channels_last and inputs.ndim == 4:  # images or CNN maps; a ViT's cached tokens are 3-D
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.device.type, dtype=self.precision.dtype, enabled=self.precision.enabled):
            embeddings = self.train_model(inputs, self.train_batches.start_stage)
        embeddings = gather_with_grad(embeddings, self.ctx)  # every rank: the loss of the global batch
        labels = gather_with_grad(labels, self.ctx)
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(same_on_every_rank_seed(self.cfg.trainer.seed, self.global_step))
            loss = self.loss(embeddings.float(), labels)
        value = self.optimization(
            loss, where=f"epoch {epoch}, step {step + 1}", scale=global_batch_loss_scale(self.ctx)
        )
        self.global_step += 1
        return value

    def _log_epoch(self, epoch: int, stats: dict[str, float] | None, val: SplitMetrics | None) -> None:
        if not self.ctx.is_main:
            return
        row: dict[str, Any] = {"epoch": epoch, "global_step": self.global_step, **(stats or {"train_loss": None})}
        row["val"] = val.validation_dict() if val else None
        with open(self.paths.metrics, "a") as handle:
            handle.write(json.dumps(row) + "\n")
        self.tracker.log_epoch(row)
        title = f"{self.cfg.loss.name} / {self.cfg.model.backbone}"
        plot_curves(
            self.paths.metrics,
            self.paths.curves,
            title=title,
            best_epoch=self.selection.best_epoch,
            reference=reference_name(self.cfg.model),
        )
        if self.progress:
            shown = (
                f"val MAP@R {val.map_at_r:.4f} P@1 {val.float_metrics.precision_at_1:.4f}" if val else "no validation"
            )
            if stats:
                tqdm.write(
                    f"epoch {epoch}: loss {stats['train_loss']:.4f}  {shown}  ({stats['images_per_second']:.1f} img/s)"
                )
            else:
                tqdm.write(f"epoch 0 ({reference_name(self.cfg.model)} backbone, the reference): {shown}")
