"""The final runs of one loss: its best settings trained once per seed on each of the k folds.

Run s trains with seed ``--seed + 1 + s`` (the search trains with ``--seed``), k models, each
chosen on its own validation fold as in the search; then, and only then, each model embeds the
test classes once, and ``run_metrics`` gives the separated and concatenated numbers. A finished
run is recorded in ``final/LOSS/seed_S.json`` and never repeated.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.training.study.backends.fold_result import StudyBackend
from retrieval.training.study.backends.study_evaluation import run_metrics
from retrieval.training.study.study_state import StudySpec
from retrieval.training.study.tuning.study_config import loss_config

log = logging.getLogger(__name__)
FINAL_DIR = "final"


def final_seed(spec: StudySpec, run: int) -> int:
    return spec.seed + 1 + run


def final_runs(
    spec: StudySpec, loss: str, params: dict[str, Any], backend: StudyBackend, out: Path, *, progress: bool
) -> list[dict[str, Any]]:
    """Every final run's record (reading finished ones, training the others)."""
    records = []
    for run in range(spec.seeds):
        path = out / FINAL_DIR / loss / f"seed_{run}.json"
        if path.is_file():
            records.append(json.loads(path.read_text()))
            continue
        record = _final_run(spec, loss, params, backend, out / FINAL_DIR / loss / f"seed_{run}", run)
        atomic_write_text(path, json.dumps(record, indent=2) + "\n")
        records.append(record)
        concatenated, separated = record["concatenated"]["float"], record["separated"]["float"]
        message = (
            f"{loss} final run {run + 1}/{spec.seeds} (seed {record['seed']}): test MAP@R concatenated "
            f"{concatenated['map_at_r']:.4f}, separated {separated['map_at_r']:.4f}; {record['seconds']:.1f}s"
        )
        if progress:
            tqdm.write(message)
        else:
            log.info(message)
    return records


def _final_run(
    spec: StudySpec, loss: str, params: dict[str, Any], backend: StudyBackend, workdir: Path, run: int
) -> dict[str, Any]:
    started = time.perf_counter()
    seed = final_seed(spec, run)
    cfg = loss_config(spec, loss, params, seed=seed)
    fits, embeddings = [], []
    for fold in range(spec.folds):
        fit, test_embeddings = backend.fit_and_embed_test(cfg, fold, workdir / f"fold_{fold}")
        fits.append(fit)
        embeddings.append(test_embeddings)
    test = run_metrics(embeddings, backend.test_set)
    folds = [{**fit.to_dict(), "test": fold_test} for fit, fold_test in zip(fits, test["folds"])]
    return {
        "seed": seed,
        "params": params,
        "folds": folds,
        "separated": test["separated"],
        "concatenated": test["concatenated"],
        "embedding_dims": [int(e.shape[1]) for e in embeddings],
        "seconds": time.perf_counter() - started,
    }
