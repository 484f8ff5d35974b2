"""The functions of the flat import ``from retrieval import ...``, one per stage of the command line.

``build_index``, ``search``, ``evaluate`` and ``embed`` are ``retrieval.indexing.api``'s (no torch).
``train``, ``export``, ``study``, ``train_ensemble`` and ``config`` are ``retrieval.training.api``'s, with the
same signatures, called through a thin function that imports it (and so torch) only when it runs: a
notebook that only searches an index never loads torch. Each returns a typed result: ``TrainedRun``,
``ExportResult``, ``BuildReport``, per image a list of ``Hit(item, score)``, ``EvaluationReport``,
``EmbeddingTable``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from retrieval.indexing.api import build_index, embed, evaluate, search
from retrieval.indexing.api.inputs import PathLike
from retrieval.indexing.store.shared.items.items_db import Hit, Item

if TYPE_CHECKING:
    from retrieval.training.config.train_config import TrainConfig
    from retrieval.training.ensemble.ensemble_training import EnsembleResult
    from retrieval.training.export.onnx_export import ExportResult
    from retrieval.training.run.measures.trained_run import TrainedRun
    from retrieval.training.study.runner import StudyOutcome

__all__ = [
    "Hit",
    "Item",
    "build_index",
    "config",
    "embed",
    "evaluate",
    "export",
    "search",
    "study",
    "train",
    "train_ensemble",
]


def train(
    data: PathLike | TrainConfig | None,
    out: PathLike,
    *,
    recipe: str | None = None,
    config: PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    **options: Any,
) -> TrainedRun:
    """``retrieval train``, e.g. ``train("photos/", "runs/a", epochs=0, backbone="efficientnet_lite0",
    pretrained="imagenet")``; options are config keys by name (``retrieval.training.api.train``)."""
    from retrieval.training import api  # torch loads here, when a model is trained

    return api.train(
        data,
        out,
        recipe=recipe,
        config=config,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        **options,
    )


def export(
    run_dir: PathLike,
    out: PathLike | None = None,
    *,
    fp16: bool = False,
    quantize: Literal["int8"] | None = None,
    max_map_drop: float = 1.0,
    force: bool = False,
) -> ExportResult:
    """``retrieval export``: ``run_dir/export/model.onnx`` + ``model.json`` (``retrieval.training.api.export``)."""
    from retrieval.training import api  # torch loads here

    return api.export(run_dir, out, fp16=fp16, quantize=quantize, max_map_drop=max_map_drop, force=force)


def config(recipe: str | None = None, **sections: Mapping[str, Any]) -> TrainConfig:
    """A validated ``TrainConfig`` from a recipe and sections (``retrieval.training.api.config``)."""
    from retrieval.training import api  # the recipes read the registered losses, which need torch

    return api.config(recipe, **sections)


def train_ensemble(
    cfg: TrainConfig,
    out: PathLike,
    members: int | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> EnsembleResult | None:
    """``retrieval train --ensemble members`` (``retrieval.training.api.train_ensemble``)."""
    from retrieval.training import api  # torch loads here

    return api.train_ensemble(cfg, out, members, resume=resume, overwrite=overwrite, progress=progress)


def study(
    data: PathLike,
    losses: Sequence[str],
    out: PathLike,
    *,
    overwrite: bool = False,
    progress: bool = True,
    **options: Any,
) -> StudyOutcome:
    """``retrieval study``: losses compared fairly (``retrieval.training.api.study``)."""
    from retrieval.training import api  # torch loads here

    return api.study(data, losses, out, overwrite=overwrite, progress=progress, **options)
