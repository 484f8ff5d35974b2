"""How a run is trained, as ``retrieval train`` and the Python API's ``train`` both do it: one fit, or with
``trainer.final_fit`` a fit that measures and a second that uses every class.

A class-disjoint split is the right way to measure, but a model meant to search a user's own classes should
have seen all of them. ``trainer.final_fit`` does both: the first fit (``RUN_DIR/selection``, a run directory
itself) chooses the number of epochs on the validation classes and reports the test classes as usual; the
run's own model is then trained again from the same start on every class (``data.split: none``) for that
many epochs, with nothing left to validate or test on. ``test_metrics.json`` of the run keeps the first fit's
figures and says so. The final fit whitens as the first fit chose (``whitening``: method and dim), with
nothing left to choose on. ``data.split: none`` alone trains on every class with no measurement at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.common.score_calibration import MeasuredFit, ScoreCalibration
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict
from retrieval.training.config.train_config import TrainConfig, WhiteningConfig
from retrieval.training.run.fitting.distributed import DistContext, barrier
from retrieval.training.run.fitting.trainer import Trainer, TrainResult
from retrieval.training.run.measures.calibration_fit import CALIBRATION_NAME, run_calibration
from retrieval.training.run.measures.reference import reference_name
from retrieval.training.run.measures.trained_run import FinalFit, TrainedRun, epochs_text
from retrieval.training.run.outputs.run_dir import RunPaths, load_checkpoint


def fit_run(
    cfg: TrainConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    progress: bool = True,
    ctx: DistContext | None = None,
    stop_check: Callable[[], None] | None = None,
) -> TrainedRun:
    """Train ``cfg`` into ``run_dir`` (one fit, or a fit and a final fit on every class)."""
    ctx = ctx or DistContext.single()
    if not cfg.trainer.final_fit:
        result = _fit(cfg, run_dir, resume=resume, progress=progress, ctx=ctx, stop_check=stop_check)
        test = result.test or _untested(cfg, result, ctx)
        return TrainedRun.of(result.run_dir, result.best_epoch, result.epochs_completed, test)
    if cfg.data.split == "none":
        raise ConfigError(
            "trainer.final_fit chooses the epochs on the class-disjoint split, so it needs data.split classes "
            "(leave out --split none, or leave out --final-fit to train on every class without measuring)"
        )
    paths = RunPaths(run_dir)
    first_test = _selection_fit(cfg, paths, resume=resume, progress=progress, ctx=ctx, stop_check=stop_check)
    epochs = int(first_test["best_epoch"])
    every_class = cfg.model_copy(
        update={
            "data": cfg.data.model_copy(update={"split": "none"}),
            "trainer": cfg.trainer.model_copy(update={"epochs": epochs, "final_fit": False, "patience": None}),
            "whitening": chosen_whitening(cfg, paths.selection_dir),
        }
    )
    final = _fit(every_class, run_dir, resume=resume, progress=progress, ctx=ctx, stop_check=stop_check)
    num_classes = len(load_checkpoint(paths.best_checkpoint).get("training_classes") or [])
    final_fit = FinalFit(epochs, num_classes, paths.selection_dir)
    kept = keep_measured_calibration(paths, final_fit) if ctx.is_main else None
    verdict = _with_final_fit(first_test.get("verdict"), final_fit)
    test = {
        **first_test,
        "verdict": verdict.model_dump(mode="json"),
        "final_fit": {"epochs": epochs, "classes": num_classes, "selection": str(paths.selection_dir)},
    }
    if kept is not None and isinstance(test.get("calibration"), dict):
        test["calibration"] = {**test["calibration"], "sentence": kept.sentence}
    _write_test_document(paths, test, ctx)
    return TrainedRun.of(run_dir, final.best_epoch, final.epochs_completed, test, final_fit)


def keep_measured_calibration(paths: RunPaths, final_fit: FinalFit) -> ScoreCalibration | None:
    """The final fit has no validation classes to fit a calibration on: it keeps the class-disjoint fit's
    (``selection/calibration.json``), recording the epochs and classes that fit's model was trained on."""
    measured = run_calibration(paths.selection_dir)
    target = paths.run_dir / CALIBRATION_NAME
    if measured is None:
        target.unlink(missing_ok=True)
        return None
    trained = len(load_checkpoint(RunPaths(paths.selection_dir).best_checkpoint).get("training_classes") or [])
    note = MeasuredFit(
        epochs=final_fit.epochs,
        training_classes=trained,
        final_classes=final_fit.num_classes,
        selection=str(paths.selection_dir),
    )
    kept = measured.kept_for_final_fit(note)
    atomic_write_text(target, kept.model_dump_json(indent=2) + "\n")
    return kept


def exported_calibration(paths: RunPaths) -> ScoreCalibration | None:
    """The calibration ``retrieval export`` copies into ``model.json``: the run's own, or for a final fit
    trained before it kept one, the class-disjoint fit's, carried over now (``keep_measured_calibration``)."""
    own = run_calibration(paths.run_dir)
    if own is not None or not paths.test_metrics.is_file():
        return own
    try:
        recorded = json.loads(paths.test_metrics.read_text()).get("final_fit")
        final_fit = FinalFit(int(recorded["epochs"]), int(recorded["classes"]), paths.selection_dir)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # no final fit (or an unreadable record): nothing to carry over
    return keep_measured_calibration(paths, final_fit)


def chosen_whitening(cfg: TrainConfig, selection_dir: Path) -> WhiteningConfig:
    """The whitening the first fit chose on its validation classes, for the final fit (which has none)."""
    report = RunPaths(selection_dir).whitening_report
    if cfg.whitening.method == "none" or not report.is_file():
        return cfg.whitening
    chosen = json.loads(report.read_text())["model"]
    return cfg.whitening.model_copy(update={"method": chosen["method"], "dim": chosen["dim"]})


def _fit(
    cfg: TrainConfig,
    run_dir: Path,
    *,
    resume: bool,
    progress: bool,
    ctx: DistContext,
    stop_check: Callable[[], None] | None,
) -> TrainResult:
    trainer = Trainer(cfg, run_dir, resume=resume, progress=progress, ctx=ctx)
    if stop_check is not None:
        trainer.stop_check = stop_check
    return trainer.fit()


def _selection_fit(
    cfg: TrainConfig,
    paths: RunPaths,
    *,
    resume: bool,
    progress: bool,
    ctx: DistContext,
    stop_check: Callable[[], None] | None,
) -> dict[str, Any]:
    """The first, class-disjoint fit's test document (a resumed run reuses a finished first fit)."""
    selection = RunPaths(paths.selection_dir)
    if resume and selection.test_metrics.is_file():
        return json.loads(selection.test_metrics.read_text())
    first = _fit(cfg, selection.run_dir, resume=resume, progress=progress, ctx=ctx, stop_check=stop_check)
    barrier(ctx)  # the main rank wrote test_metrics.json
    return first.test if ctx.is_main else json.loads(selection.test_metrics.read_text())


def _untested(cfg: TrainConfig, result: TrainResult, ctx: DistContext) -> dict[str, Any]:
    """The test document of a run with nothing held out (``data.split: none``): the verdict alone."""
    if cfg.data.split != "none":
        return {}
    reference = reference_name(cfg.model)
    if result.best_epoch == 0:
        sentence = f"no training epoch ran: the {reference} backbone is the run's model"
    else:
        sentence = f"trained on every class for {epochs_text(result.best_epoch)}"
    sentence += " (data.split none: no classes were held out, so nothing was measured; --final-fit measures first)"
    copies = result.data_copies.sentence() if result.data_copies is not None else None
    verdict = TrainingVerdict(
        sentence=sentence + (f"; {copies}" if copies else ""),
        decision="unmeasured",
        reference=reference,
        best_epoch=result.best_epoch,
        data_copies=result.data_copies,
    )
    test = {"best_epoch": result.best_epoch, "split": "none", "verdict": verdict.model_dump(mode="json")}
    _write_test_document(RunPaths(result.run_dir), test, ctx)
    return test


def _with_final_fit(first: dict[str, Any] | None, final_fit: FinalFit) -> TrainingVerdict:
    """The first fit's verdict (its decision, intervals and counts), its sentence followed by the final fit's."""
    if not first:
        return TrainingVerdict(sentence=final_fit.sentence(), decision="unmeasured")
    verdict = TrainingVerdict.model_validate(first)
    return verdict.with_sentence(f"{verdict.sentence}; {final_fit.sentence()}")


def _write_test_document(paths: RunPaths, test: dict[str, Any], ctx: DistContext) -> None:
    if ctx.is_main:
        atomic_write_text(paths.test_metrics, json.dumps(test, indent=2) + "\n")
