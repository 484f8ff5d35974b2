"""``run_study``: the whole protocol, resumable, from the command line's ``StudySpec`` to the report."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial

from retrieval.indexing.data.splits import DatasetSplits
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.run_data import prepare_run_data
from retrieval.training.run.measures.reference import reference_name
from retrieval.training.study.backends.cached_backend import CachedBackend
from retrieval.training.study.backends.cached_features import FeatureSet, load_or_extract
from retrieval.training.study.backends.finetune_backend import FineTuneBackend
from retrieval.training.study.backends.fold_result import FoldResult, StudyBackend
from retrieval.training.study.backends.folds import check_fold_count
from retrieval.training.study.backends.head_training import build_head
from retrieval.training.study.final_runs import final_runs
from retrieval.training.study.reporting.reference import reference_metrics
from retrieval.training.study.reporting.report import Row, loss_row, reference_row, write_csv, write_plot
from retrieval.training.study.reporting.report import write_markdown as write_report_markdown
from retrieval.training.study.reporting.summary import protocol_section, search_section, tables_section, time_section
from retrieval.training.study.study_state import (
    FEATURES_DIR,
    OPTUNA_DB,
    StudySpec,
    resumable_state,
    start_study,
    write_state,
)
from retrieval.training.study.tuning.feasibility import check_batches
from retrieval.training.study.tuning.search import DIVERGED, finished_trials, open_search, run_search
from retrieval.training.study.tuning.study_config import loss_config, loss_search_space

SEARCH_DIR = "search"


@dataclass(frozen=True)
class StudyOutcome:
    out: Path
    rows: list[Row]
    state: dict[str, Any]


def run_study(spec: StudySpec, out: Path, *, overwrite: bool = False, progress: bool = True) -> StudyOutcome:
    """Search, final runs and report for every loss of ``spec``; continues the study already in ``out``."""
    out = Path(out)
    configs = {loss: loss_config(spec, loss) for loss in spec.losses}  # bad options fail before any image is read
    spaces = {loss: loss_search_space(spec, loss) for loss in spec.losses}
    if spec.cached_features:
        for cfg in configs.values():
            build_head(cfg.model, 8)  # --cached-features needs a head to train
    saved = resumable_state(out, spec, overwrite=overwrite)
    base = configs[spec.losses[0]]
    splits = _prepare_splits(base, spec.folds, progress)
    check_batches(configs, splits.train + splits.test, spec.folds)  # every trial's batch shape, before the first trial
    backend = _backend(spec, splits, out, progress)
    state = saved if saved is not None else start_study(out, spec)
    if "reference" not in state:
        state["reference"] = _reference(spec, base, splits, backend, out)
    write_state(out, state)
    storage = f"sqlite:///{(out / OPTUNA_DB).resolve()}"
    finals: dict[str, list[dict[str, Any]]] = {}
    for loss in spec.losses:
        study = open_search(storage, loss)
        objective = _objective(spec, loss, backend, out / SEARCH_DIR / loss)
        best = run_search(
            study, spaces[loss], objective, trials=spec.trials, seed=spec.seed, label=loss, progress=progress
        )
        state["losses"][loss] = _search_summary(study, best)
        write_state(out, state)
        finals[loss] = final_runs(spec, loss, dict(best.params), backend, out, progress=progress)
        state["losses"][loss]["final_runs"] = len(finals[loss])
        state["losses"][loss]["final_seconds"] = sum(run["seconds"] for run in finals[loss])
        write_state(out, state)
    rows = _write_report(spec, out, state, finals)
    return StudyOutcome(out, rows, state)


def _prepare_splits(base: TrainConfig, folds: int, progress: bool) -> DatasetSplits:
    """Scan and split once: the whole training pool (no validation carved out) and the test classes."""
    pool = base.data.model_copy(update={"val_fraction": 0.0, "val_fold": None, "meta_classes": None})
    splits = prepare_run_data(pool, progress=progress).splits
    check_fold_count(len(splits.train_classes), folds)
    return splits


def _backend(spec: StudySpec, splits: DatasetSplits, out: Path, progress: bool) -> StudyBackend:
    if spec.cached_features:
        return CachedBackend(splits.train + splits.test, splits.test, spec.folds, out / FEATURES_DIR)
    return FineTuneBackend(splits.test, spec.folds, progress=progress)


def _objective(
    spec: StudySpec, loss: str, backend: StudyBackend, workdir: Path
) -> Callable[[dict[str, Any]], list[FoldResult]]:
    """Trial settings -> the k fold results (search runs train with ``--seed``; folds of the same settings
    share a directory named by them, so a re-queued trial continues its finished folds)."""

    def objective(params: dict[str, Any]) -> list[FoldResult]:
        cfg = loss_config(spec, loss, params, seed=spec.seed)
        trial_dir = workdir / _params_dirname(params)
        return [backend.fit(cfg, fold, trial_dir / f"fold_{fold}") for fold in range(spec.folds)]

    return objective


def _params_dirname(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]


def _reference(
    spec: StudySpec, base: TrainConfig, splits: DatasetSplits, backend: StudyBackend, out: Path
) -> dict[str, Any]:
    """The reference row: pooled features of the first loss's backbone (cached like --cached-features')."""
    started = time.perf_counter()
    if isinstance(backend, CachedBackend):
        features: FeatureSet = backend.features(base)
    else:
        features = load_or_extract(base, splits.train + splits.test, out / FEATURES_DIR)
    embedding_dim = base.model.embedding_dim or features.dim
    result = reference_metrics(features, splits.train, splits.test, embedding_dim=embedding_dim, folds=spec.folds)
    result.update(
        name=reference_name(base.model),
        backbone=base.model.backbone,
        pretrained=base.model.pretrained,
        seconds=time.perf_counter() - started,
    )
    return result


def _search_summary(study: optuna.Study, best: FrozenTrial) -> dict[str, Any]:
    finished = finished_trials(study)
    seconds = sum(
        (trial.datetime_complete - trial.datetime_start).total_seconds()
        for trial in finished
        if trial.datetime_complete and trial.datetime_start
    )
    return {
        "trials_finished": len(finished),
        "trials_diverged": sum(DIVERGED in trial.user_attrs for trial in finished),
        "best_trial": best.number,
        "best_val_map_at_r": best.value,
        "best_params": dict(best.params),
        "best_folds": best.user_attrs.get("folds"),
        "search_seconds": seconds,
    }


def _write_report(
    spec: StudySpec, out: Path, state: dict[str, Any], finals: dict[str, list[dict[str, Any]]]
) -> list[Row]:
    reference = state["reference"]
    rows = [reference_row(reference["name"], reference)]
    rows += [loss_row(loss, runs) for loss, runs in finals.items()]
    dims = _dims(spec, finals)
    write_csv(out / "study.csv", rows)
    title = f"{Path(spec.data).name}: test MAP@R, {spec.protocol}, mean ± 95% CI over {spec.seeds} run(s)"
    write_plot(out / "study.png", rows, title)
    seconds = {"reference": reference["seconds"]}
    seconds["search"] = sum(summary["search_seconds"] for summary in state["losses"].values())
    seconds["final runs"] = sum(summary["final_seconds"] for summary in state["losses"].values())
    header = f"# Study: {spec.data}\n\n{len(spec.losses)} losses, {spec.protocol}; see `study.csv` and `study.png`."
    write_report_markdown(
        out / "study.md",
        [
            header,
            protocol_section(spec, reference["name"], reference, f"{dims['concatenated']} vs {dims['separated']}"),
            tables_section(rows, dims),
            search_section(state["losses"]),
            time_section(spec, out, seconds),
        ],
    )
    return rows


def _dims(spec: StudySpec, finals: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Column labels: 'k x d-dim' concatenated, 'd-dim' separated (from the final runs' embeddings)."""
    sizes = sorted({int(np.sum(run["embedding_dims"])) for runs in finals.values() for run in runs})
    single = sorted({dim for runs in finals.values() for run in runs for dim in run["embedding_dims"]})
    return {
        "concatenated": "/".join(f"{size}-dim" for size in sizes) or "n/a",
        "separated": "/".join(f"{size}-dim" for size in single) or "n/a",
    }
