"""``retrieval train --ensemble L``: L members trained one after the other, evaluated joined.

Member i is a normal run directory ``members/i`` trained with the run's configuration and seed
``trainer.seed + i``, so members differ in initialisation, batch order and augmentation. With
``data.meta_classes`` D set, each member also trains on its own random grouping of the training
classes into D meta-classes (DREML, Xuan et al. ECCV 2018; ``training.class_grouping``), drawn from
its seed; validation and test always use the true classes. Each member chooses its best epoch on
validation MAP@R as any run does. The joined embedding (L x d dimensions, ``ensemble_model``) is
then evaluated on validation and test and written to ``ensemble_metrics.json`` next to the
members' own metrics. A finished member (one with ``test_metrics.json``) is skipped on ``--resume``;
an unfinished one continues from its ``checkpoints/last.pt``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.ensemble.ensemble_eval import evaluate_ensemble
from retrieval.training.run.fitting.distributed import DistContext, barrier
from retrieval.training.run.fitting.trainer import Trainer
from retrieval.training.run.measures.run_summary import Row, log_summary
from retrieval.training.run.outputs.run_dir import RunPaths, load_checkpoint, write_run_config

log = logging.getLogger(__name__)


class EnsembleSpec(BaseModel):
    """``ensemble.json``: what makes a run directory an ensemble (the rest is the base config.yaml)."""

    model_config = ConfigDict(extra="forbid")

    members: int = Field(ge=1)


@dataclass(frozen=True)
class EnsembleResult:
    run_dir: Path
    metrics: dict[str, Any]  # the content of ensemble_metrics.json


def read_ensemble_spec(run_dir: Path) -> EnsembleSpec | None:
    """The saved spec of an ensemble run directory, None for a single run (or nothing yet)."""
    path = RunPaths(run_dir).ensemble_spec
    return EnsembleSpec.model_validate_json(path.read_text()) if path.is_file() else None


def resolve_ensemble(run_dir: Path, members: int | None, *, resume: bool) -> EnsembleSpec | None:
    """The ensemble to train into ``run_dir`` (``--ensemble``, or the saved one on ``--resume``); None: a single run."""
    if members is not None and members < 1:
        raise ConfigError(f"--ensemble is the number of models to train and must be at least 1, got {members}")
    saved = read_ensemble_spec(run_dir) if resume else None
    if saved is not None and members not in (None, saved.members):
        raise ConfigError(
            f"{run_dir} is an ensemble of {saved.members} members; resume it with --ensemble {saved.members} "
            "or without --ensemble"
        )
    if saved is None and members is not None and resume and RunPaths(run_dir).checkpoints_dir.is_dir():
        raise ConfigError(f"{run_dir} holds a single run, which --resume cannot turn into an ensemble; use a new --out")
    return saved or (EnsembleSpec(members=members) if members is not None else None)


def member_config(base: TrainConfig, index: int) -> TrainConfig:
    """Member ``index`` trains with seed ``trainer.seed + index`` (so also its own DREML grouping). A member
    is a trained epoch: members that all fell back to the starting backbone would be one model repeated."""
    trainer = base.trainer.model_copy(update={"seed": base.trainer.seed + index, "select_reference": False})
    return base.model_copy(update={"trainer": trainer})


def train_ensemble(
    cfg: TrainConfig,
    run_dir: Path,
    spec: EnsembleSpec,
    *,
    progress: bool = True,
    ctx: DistContext | None = None,
    stop_check: Callable[[], None] | None = None,
) -> EnsembleResult | None:
    """Train the members that are not finished, then evaluate the joined embedding (None on ranks > 0)."""
    ctx, paths = ctx or DistContext.single(), RunPaths(run_dir)
    if ctx.is_main:
        log_summary(_summary_rows(cfg, paths, spec))
    for index in range(spec.members):
        member = RunPaths(paths.member_dir(index))
        if member.test_metrics.is_file():
            log.info("member %d (%d of %d) finished earlier: skipped", index, index + 1, spec.members)
            continue
        member_cfg = member_config(cfg, index)
        trainer = Trainer(
            member_cfg, member.run_dir, resume=member.last_checkpoint.is_file(), progress=progress, ctx=ctx
        )
        if stop_check is not None:
            trainer.stop_check = stop_check
        _write_ensemble_files(paths, cfg, spec, ctx)  # only now: a config error above leaves no run behind
        log.info(
            "member %d (%d of %d): seed %d -> %s",
            index,
            index + 1,
            spec.members,
            member_cfg.trainer.seed,
            member.run_dir,
        )
        trainer.fit()
    _write_ensemble_files(paths, cfg, spec, ctx)
    barrier(ctx)
    if not ctx.is_main:
        return None
    metrics = _ensemble_metrics(cfg, paths, spec, progress)
    atomic_write_text(paths.ensemble_metrics, json.dumps(metrics, indent=2) + "\n")
    return EnsembleResult(paths.run_dir, metrics)


def _summary_rows(cfg: TrainConfig, paths: RunPaths, spec: EnsembleSpec) -> list[Row]:
    """The ensemble's own start-of-run rows; each member's run then logs its full summary."""
    last_seed = cfg.trainer.seed + spec.members - 1
    grouping = f", each on its own grouping into {cfg.data.meta_classes} meta-classes" if cfg.data.meta_classes else ""
    return [
        ("ensemble", f"{spec.members} members, seeds {cfg.trainer.seed}..{last_seed}{grouping}"),
        ("run", f"{paths.run_dir} (members in {paths.members_dir})"),
    ]


def _write_ensemble_files(paths: RunPaths, cfg: TrainConfig, spec: EnsembleSpec, ctx: DistContext) -> None:
    if ctx.is_main:
        write_run_config(paths.run_dir, cfg)
        atomic_write_text(paths.ensemble_spec, spec.model_dump_json(indent=2) + "\n")


def _ensemble_metrics(cfg: TrainConfig, paths: RunPaths, spec: EnsembleSpec, progress: bool) -> dict[str, Any]:
    member_dirs = [paths.member_dir(index) for index in range(spec.members)]
    joined = evaluate_ensemble(cfg, member_dirs, progress=progress)
    dims = joined["member_embedding_dims"]
    return {
        "members": spec.members,
        "meta_classes": cfg.data.meta_classes,
        "member_embedding_dim": dims[0],
        "embedding_dim": sum(dims),
        "val": joined["val"],
        "test": joined["test"],
        "member_metrics": [_member_summary(paths.run_dir, member_dir) for member_dir in member_dirs],
    }


def _member_summary(run_dir: Path, member_dir: Path) -> dict[str, Any]:
    """A member's own numbers: its seed, best epoch, validation metrics there, and test metrics."""
    member = RunPaths(member_dir)
    best = load_checkpoint(member.best_checkpoint)
    test = json.loads(member.test_metrics.read_text())
    return {
        "run_dir": member_dir.relative_to(run_dir).as_posix(),
        "seed": best["config"]["trainer"]["seed"],
        "best_epoch": best["epoch"],
        "val": best.get("val_metrics") or None,
        "test": {kind: test[kind] for kind in ("float", "binary")},
    }
