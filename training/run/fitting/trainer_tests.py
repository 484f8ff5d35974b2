"""The trainer's measuring part: validation, the choice between the best epoch and epoch 0, the whitening
stage, and the one test of the chosen model and of the reference (``verdict``)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import torch

from retrieval.indexing.common.atomic_write import atomic_write_bytes, atomic_write_text
from retrieval.indexing.eval.gain_interval import paired_gain_interval
from retrieval.indexing.exported_model.training_verdict import GainInterval
from retrieval.training.config.hub_access import has_tower_embedding, model_hub_access
from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.model.tower_projection import tower_head
from retrieval.training.run.fitting.distributed import barrier
from retrieval.training.run.fitting.trainer_parts import TrainerParts
from retrieval.training.run.inputs.split_inputs import SplitInputs
from retrieval.training.run.measures.calibration_fit import DISTRACTOR_IMAGES, fit_run_calibration
from retrieval.training.run.measures.reference import (
    PooledFeatures,
    fit_reduction,
    fit_sample,
    reference_model,
    reference_name,
    tower_reference,
)
from retrieval.training.run.measures.split_metrics import SplitMetrics, split_metrics
from retrieval.training.run.measures.verdict import Verdict, beats_reference
from retrieval.training.run.measures.whitening_stage import whiten_model
from retrieval.training.run.outputs.run_dir import Checkpoint, load_checkpoint, save_checkpoint
from retrieval.training.run.outputs.run_model import restore_model

log = logging.getLogger(__name__)


class TrainerTests(TrainerParts):
    """Validation, selection, whitening and the final test of ``Trainer``."""

    # ---- the whitening stage ---------------------------------------------------------------
    def _whitening_stage(self) -> None:
        """Fit the whitening on the chosen model (best.pt) and on the reference (reference_whitened.pt)."""
        if self.cfg.whitening.method != "none" and self.ctx.is_main:
            started = time.perf_counter()
            fit = SplitInputs(
                fit_sample(self.data.splits.train, self.cfg.whitening.fit_images),
                self.data.eval_label_index,
                self.cfg,
                self.device,
                self.precision,
                self.prefix,
            )
            best = load_checkpoint(self.paths.best_checkpoint)
            whitened, report = self._whitened(best, fit)
            save_checkpoint(self.paths.best_checkpoint, whitened)
            reports = {"model": report}
            if int(best["epoch"]) != 0:
                whitened, reports["reference"] = self._whitened(load_checkpoint(self.paths.reference_checkpoint), fit)
            save_checkpoint(self.paths.whitened_reference_checkpoint, whitened)
            atomic_write_text(self.paths.whitening_report, json.dumps(reports, indent=2) + "\n")
            log.info("whitening stage: %s in %.0f s", report["method"], time.perf_counter() - started)
        barrier(self.ctx)

    def _whitened(self, state: dict[str, Any], fit: SplitInputs) -> tuple[Checkpoint, dict[str, Any]]:
        """``state`` with its model followed by the whitening fitted on ``fit`` (chosen on the validation classes)."""
        model = restore_model(state, self.cfg, self.paths.run_dir).to(self.device)
        result = whiten_model(
            model, self.cfg.whitening, fit, self.val_inputs, ks=self.cfg.trainer.recall_ks, seed=self.cfg.trainer.seed
        )
        model_config = dict(state.get("model_config") or self.cfg.model.model_dump(mode="json"))
        model_config["whitened_dim"] = result.model.embedding_dim if result.model.whitening is not None else None
        whitened = {**state, "model": result.model.state_dict(), "model_config": model_config}
        return whitened, {**result.report, "epoch": int(state["epoch"])}  # type: ignore[return-value]

    # ---- evaluation and selection ---------------------------------------------------------
    def _reference_model(self) -> EmbeddingModel:
        """The starting model as the reference row defines it: pooled features reduced as fitted on (at most
        ``FIT_IMAGES``) training images of the training split; a CLIP tower's own embedding, nothing fitted."""
        if has_tower_embedding(self.cfg.model):
            access = model_hub_access(self.cfg.model)
            return tower_reference(self.model, *tower_head(self.cfg.model.backbone, self.model.backbone, access))
        fit = SplitInputs(
            fit_sample(self.data.splits.train),
            self.data.eval_label_index,
            self.cfg,
            self.device,
            self.precision,
            self.prefix,
        )
        features = fit.embed(PooledFeatures(self.model))[~fit.dataset.bad_mask()]
        return reference_model(self.model, fit_reduction(features, self.model.embedding_dim))

    def _metrics(self, inputs: SplitInputs, model: torch.nn.Module, *, test: bool, grid: bool = True) -> SplitMetrics:
        """Metrics of ``model`` on a split under its records' flags (``evaluate_retrieval``, as ``retrieval eval``);
        images found unreadable while embedding are left out and counted. ``grid``: log its retrieval grid."""
        embeddings = inputs.embed(model)
        if grid:
            self.tracker.log_retrieval_grid("test" if test else "val", inputs.dataset, embeddings, self.global_step)
        kinds = ("float", "binary") if test else ("float",)
        return split_metrics(
            embeddings, inputs.labels, inputs.dataset, kinds=kinds, ks=self.cfg.trainer.recall_ks, compute_nmi=test
        )

    def _validate(self, model: torch.nn.Module) -> SplitMetrics | None:
        if self.val_inputs is None or not self.ctx.is_main:
            return None
        return self._metrics(self.val_inputs, model, test=False)

    def _record_selection(self, epoch: int, val: SplitMetrics | None) -> bool:
        """Best = highest validation MAP@R; without a validation split, the latest epoch."""
        return self.selection.record(epoch, val.map_at_r if val else float(epoch))

    def _settle_selection(self) -> GainInterval | None:
        """The best epoch's validation gain over epoch 0; when it is not above noise, epoch 0 becomes the best
        checkpoint (epoch 0 a candidate: ``trainer.select_reference``). Main rank only (others: None)."""
        if not self.ctx.is_main or self.val_inputs is None or not self.paths.reference_checkpoint.is_file():
            return None
        reference = load_checkpoint(self.paths.reference_checkpoint)
        best = load_checkpoint(self.paths.best_checkpoint)
        if reference.get("val_query_ap") is None or best.get("val_query_ap") is None:  # an older run's checkpoints
            return None
        gain = paired_gain_interval(reference["val_query_ap"].numpy(), best["val_query_ap"].numpy())
        self.candidate_epoch = int(best["epoch"])
        if self.candidate_epoch > 0 and self.cfg.trainer.select_reference and not beats_reference(gain):
            atomic_write_bytes(self.paths.best_checkpoint, self.paths.reference_checkpoint.read_bytes())
            self.selection.best_epoch = 0
        return gain

    def _final_test(self, validation_gain: GainInterval | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Test metrics of the best checkpoint and of the reference, the verdict, and the best validation metrics."""
        barrier(self.ctx)
        if not self.ctx.is_main or self.test_inputs is None:
            return {}, None
        best = load_checkpoint(self.paths.best_checkpoint)
        model = restore_model(best, self.cfg, self.paths.run_dir).to(self.device)
        result: dict[str, Any] = {"best_epoch": best["epoch"], "split": "test"}
        reference = self._reference_test()  # first: a model that only whitens it reuses its embeddings
        tested = self._metrics(self.test_inputs, model, test=True)
        result.update(tested.to_dict())
        result["calibration"] = fit_run_calibration(
            self.val_inputs, self._calibration_distractors(), self.test_inputs, model, self.paths.run_dir
        )
        if reference is not None:  # the starting backbone's pooled features: "pretrained" or "untrained"
            result[reference_name(self.cfg.model)] = reference[1]
        whitened = self._whitened_reference_test(result if int(best["epoch"]) == 0 else None)
        if whitened is not None:
            result[f"{reference_name(self.cfg.model)}_whitened"] = whitened
        test_gain = _test_gain(reference[0], tested) if reference is not None else None
        verdict = self._verdict(int(best["epoch"]), validation_gain, test_gain, whitened)
        result["verdict"] = verdict.record().model_dump(mode="json")
        result["num_test_classes"] = len(self.data.splits.test_classes)
        result["num_test_images"] = len(self.data.splits.test)
        atomic_write_text(self.paths.test_metrics, json.dumps(result, indent=2) + "\n")
        log.info("verdict: %s", verdict.sentence())
        return result, best.get("val_metrics")

    def _calibration_distractors(self) -> SplitInputs | None:
        """The training images the calibration's validation queries are searched among (at most
        ``DISTRACTOR_IMAGES``, evenly spread over the classes); None without validation classes."""
        if self.val_inputs is None or not self.data.splits.train:
            return None
        sample = fit_sample(self.data.splits.train, DISTRACTOR_IMAGES)
        return SplitInputs(sample, self.data.eval_label_index, self.cfg, self.device, self.precision, self.prefix)

    def _reference_test(self) -> tuple[SplitMetrics, dict[str, Any]] | None:
        """Test metrics of the reference model (epoch 0), reported only, never used to choose: typed, and as written."""
        if not self.cfg.trainer.evaluate_untrained_test or not self.paths.reference_checkpoint.is_file():
            return None
        assert self.test_inputs is not None  # _final_test runs only with test classes
        state = load_checkpoint(self.paths.reference_checkpoint)
        model = restore_model(state, self.cfg, self.paths.run_dir).to(self.device)
        measured = self._metrics(self.test_inputs, model, test=True, grid=False)
        metrics = measured.to_dict()
        metrics["reference"] = {
            "name": reference_name(self.cfg.model),
            "feature_dim": model.feature_dim,
            "dim": model.embedding_dim,
            "reduction": "pca" if model.embedding_dim < model.feature_dim else "centred",
            "fit_images": len(fit_sample(self.data.splits.train)),
        }
        if has_tower_embedding(self.cfg.model):  # nothing fitted: the CLIP tower's own projection
            metrics["reference"].update(reduction="tower projection", fit_images=0)
        return measured, metrics

    def _whitened_reference_test(self, kept: dict[str, Any] | None) -> dict[str, Any] | None:
        """Test metrics of the reference + whitening (where the run has a whitening stage), reported only;
        ``kept``: the run's own test metrics when its model is that very model (epoch 0 kept)."""
        path = self.paths.whitened_reference_checkpoint
        if self.cfg.whitening.method == "none" or not self.cfg.trainer.evaluate_untrained_test or not path.is_file():
            return None
        assert self.test_inputs is not None  # _final_test runs only with test classes
        metrics: dict[str, Any]
        if kept is not None:
            metrics = {kind: kept[kind] for kind in ("float", "binary", "unreadable_images") if kind in kept}
        else:
            model = restore_model(load_checkpoint(path), self.cfg, self.paths.run_dir).to(self.device)
            metrics = self._metrics(self.test_inputs, model, test=True, grid=False).to_dict()
        report = json.loads(self.paths.whitening_report.read_text())
        metrics["whitening"] = report.get("reference", report.get("model"))
        return metrics

    def _verdict(
        self,
        best_epoch: int,
        validation: GainInterval | None,
        test: GainInterval | None,
        whitened: dict[str, Any] | None = None,
    ) -> Verdict:
        return Verdict(
            reference=reference_name(self.cfg.model),
            epochs=self.cfg.trainer.epochs,
            best_epoch=best_epoch,
            candidate_epoch=best_epoch if self.candidate_epoch is None else self.candidate_epoch,
            validation=validation,
            test=test,
            validation_classes=len(self.data.splits.val_classes),
            validation_queries=validation.queries if validation is not None else 0,
            whitened_reference_test=whitened["float"]["map_at_r"] if whitened else None,
        )


def _test_gain(reference: SplitMetrics, tested: SplitMetrics) -> GainInterval | None:
    """The run's model against epoch 0 on the test queries (reported only, never used to choose)."""
    before, after = reference.float_metrics.query_ap, tested.float_metrics.query_ap
    if before is None or after is None or before.shape != after.shape:
        return None
    return paired_gain_interval(before, after)
