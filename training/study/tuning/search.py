"""The hyperparameter search of one loss: optuna TPE maximising the mean validation MAP@R over the folds.

Trials live in the study's SQLite storage (one optuna study per loss), so a rerun continues: a
finished trial (completed, or diverged: its loss became NaN) is never run again, and a trial cut
off mid-way is marked failed and its settings queued to run first. Each trial's sampler is seeded
with ``seed + trials finished``, so an interrupted search draws what an uninterrupted one would.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

from retrieval.indexing.common.errors import RetrievalError
from retrieval.training.run.fitting.loop import TrainingDiverged
from retrieval.training.study.backends.fold_result import FoldResult
from retrieval.training.study.tuning.search_space import Dimension, distributions

log = logging.getLogger(__name__)
DIVERGED = "diverged"
Objective = Callable[[dict[str, Any]], Sequence[FoldResult]]


def open_search(storage: str, loss: str) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=storage, study_name=loss, direction="maximize", load_if_exists=True)


def finished_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Completed trials and diverged ones: neither is ever run again."""
    return [
        trial
        for trial in study.get_trials(deepcopy=False)
        if trial.state == TrialState.COMPLETE or (trial.state == TrialState.FAIL and DIVERGED in trial.user_attrs)
    ]


def requeue_interrupted(study: optuna.Study) -> int:
    """Trials left running by a killed process: mark them failed and queue their settings again."""
    stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in stale:
        study.tell(trial.number, state=TrialState.FAIL)
        study.enqueue_trial(trial.params)
    return len(stale)


def run_search(
    study: optuna.Study,
    space: Mapping[str, Dimension],
    objective: Objective,
    *,
    trials: int,
    seed: int,
    label: str,
    progress: bool,
) -> FrozenTrial:
    """Run trials until ``trials`` are finished; returns the best completed one."""
    requeue_interrupted(study)
    dists = distributions(space)
    done = len(finished_trials(study))
    bar = tqdm(total=trials, initial=done, desc=f"search {label}", unit="trial", disable=not progress, leave=False)
    while done < trials:
        study.sampler = optuna.samplers.TPESampler(seed=seed + done)
        trial = study.ask(dists)
        started = time.perf_counter()
        try:
            folds = objective(dict(trial.params))
        except TrainingDiverged as error:
            trial.set_user_attr(DIVERGED, str(error))
            study.tell(trial, state=TrialState.FAIL)
            line = f"diverged ({error})"
        else:
            values = [fold.val_map_at_r for fold in folds]
            trial.set_user_attr("folds", [fold.to_dict() for fold in folds])
            trial.set_user_attr("seconds", time.perf_counter() - started)
            study.tell(trial, float(np.mean(values)))
            line = f"val MAP@R {np.mean(values):.4f} (folds {' '.join(f'{v:.3f}' for v in values)})"
        done += 1
        best = best_trial(study, label, required=False)
        best_text = f"best {best.value:.4f} (trial {best.number})" if best else "no trial completed yet"
        bar.update()
        bar.set_postfix_str(best_text)
        message = f"{label} trial {done}/{trials}: {line}; {best_text}; {time.perf_counter() - started:.1f}s  "
        if progress:
            tqdm.write(message + format_params(trial.params))
        else:
            log.info("%s%s", message, format_params(trial.params))
    bar.close()
    chosen = best_trial(study, label, required=True)
    assert chosen is not None
    return chosen


def best_trial(study: optuna.Study, label: str, *, required: bool) -> FrozenTrial | None:
    completed = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not completed:
        if required:
            raise RetrievalError(
                f"every search trial of {label} diverged (the loss became NaN); narrow its learning-rate ranges "
                "with --set (e.g. --set optimizer.head_lr=0.001) or use another --out"
            )
        return None
    return max(completed, key=lambda trial: (trial.value, -trial.number))


def format_params(params: Mapping[str, Any]) -> str:
    """``margin=0.123 head_lr=0.00123``: the last part of each dotted key, 3 significant digits."""
    return " ".join(
        f"{key.rsplit('.', 1)[-1]}={value:.3g}" if isinstance(value, float) else f"{key.rsplit('.', 1)[-1]}={value}"
        for key, value in params.items()
    )
