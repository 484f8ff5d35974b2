"""The Python API: the command line's stages as functions, for notebooks and scripts (docs/python.md).

    from retrieval.training import usecases as api
    run = api.train("data/", "runs/ns", recipe="normsoftmax", epochs=4)  # -> TrainedRun (.test.reference, .verdict)
    cfg = api.config("normsoftmax", data={"path": "data/"}, trainer={"epochs": 4})   # or a TrainConfig
    run = api.train(cfg, "runs/ns", overwrite=True)
    api.export(run.run_dir)                     # -> ExportResult (runs/ns/export: model.onnx + model.json)
    api.build_index(run.run_dir, "data/", "index/", split="test")
    hits = api.search("index/", ["query.jpg"], k=5)   # per image: [(Item, score), ...]
    report = api.evaluate(index="index/")       # -> EvaluationReport (.metrics["float"].map_at_r)
    table = api.embed("runs/ns", "data/")       # -> EmbeddingTable (ids, paths, labels, embeddings)
    api.train_ensemble(cfg, "runs/ens", members=3)        # retrieval train --ensemble 3
    api.study("data/", ["normalized_softmax", "multi_similarity"], "study/", trials=4)  # retrieval study
    copies = api.data_duplicates("data/", "dups/")          # retrieval data duplicates -> DatasetCopies
    audit = api.data_audit("data/", "audit/")               # retrieval data audit -> AuditReport

Each function is a thin call of the implementation the matching command uses (``Trainer``,
``export_run``, ``train_ensemble``, ``run_study``), so the API and the CLI cannot drift apart. What
needs no torch (``build_index``, ``search``, ``evaluate``, ``embed``) is ``retrieval.indexing.usecases``'s,
re-exported here so one import serves a whole notebook; importing ``retrieval.indexing.usecases`` alone
never loads torch. ``from retrieval import ...`` (the root package) is the flat import of all of them
that loads torch only when ``train``, ``export`` or ``study`` is called. Errors are the same one-sentence
``RetrievalError``s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from retrieval.indexing.audit.audit_report import AuditReport
from retrieval.indexing.audit.auditing import audit_dataset
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.duplicates.copy_thresholds import check_threshold
from retrieval.indexing.duplicates.dataset_copies import DatasetCopies
from retrieval.indexing.duplicates.dataset_duplicates import SplitSettings, find_dataset_duplicates
from retrieval.indexing.usecases import build_index, embed, evaluate, search
from retrieval.indexing.usecases.inputs import PathLike
from retrieval.training.config.config_checks import check_config, recipe_loss_warning
from retrieval.training.config.config_resolver import resolve_config
from retrieval.training.config.option_vocabulary import keyword_layer
from retrieval.training.config.recipes import recipe as recipe_layer
from retrieval.training.config.train_config import TrainConfig, build_config
from retrieval.training.config.train_request import API, TrainRequest
from retrieval.training.ensemble.ensemble_training import EnsembleResult, read_ensemble_spec, resolve_ensemble
from retrieval.training.ensemble.ensemble_training import train_ensemble as _train_ensemble
from retrieval.training.export.int8_export import Int8Request
from retrieval.training.export.onnx_export import TOLERANCE, ExportResult
from retrieval.training.export.pretrained_export import pretrained_export
from retrieval.training.export.run_export import export_run
from retrieval.training.export.size_note import size_note
from retrieval.training.run.fitting.distributed import DistContext
from retrieval.training.run.fitting.final_fit import fit_run
from retrieval.training.run.fitting.interrupt import interrupt_at_safe_points
from retrieval.training.run.measures.reference_columns import reference_column, whitened_reference_column
from retrieval.training.run.measures.trained_run import TrainedRun
from retrieval.training.run.outputs.run_dir import RunPaths, claim_run_dir, load_run_config
from retrieval.training.study.runner import StudyOutcome, run_study
from retrieval.training.study.study_state import StudySpec

log = logging.getLogger(__name__)
__all__ = ["build_index", "config", "embed", "evaluate", "export", "search", "study", "train", "train_ensemble"]
__all__ += ["data_audit", "data_duplicates"]
__all__ += [  # what the commands meet, one import away (they import nothing below this layer)
    "TOLERANCE",
    "DistContext",
    "Int8Request",
    "TrainedRun",
    "export_run",
    "interrupt_at_safe_points",
    "load_run_config",
    "reference_column",
    "size_note",
    "whitened_reference_column",
]
PRETRAINED_MODEL_DIR = "model"


def config(recipe: str | None = None, **sections: Mapping[str, Any]) -> TrainConfig:
    """A validated ``TrainConfig``: a recipe's paper defaults (``retrieval train --recipe``), with the
    given sections on top, e.g. ``config("normsoftmax", data={"path": "data/"}, trainer={"epochs": 4})``.
    An unknown key or a bad value is a ConfigError naming it."""
    layers = [(f"recipe {recipe}", recipe_layer(recipe))] if recipe else []
    return build_config([*layers, ("arguments", {name: dict(values) for name, values in sections.items()})])


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
    """Train into the run directory ``out`` as ``retrieval train`` does, e.g. ``train("photos/", "runs/a",
    epochs=0, backbone="efficientnet_lite0", pretrained="imagenet")``: the layers are ``recipe``, the YAML file
    ``config``, then ``options``: the options of ``retrieval train`` by name (``workers=0`` is ``--workers 0``,
    ``data.num_workers``; ``lr``, ``epochs``, ``split="none"``, ``final_fit=True``: ``TRAIN_OPTIONS``), or any
    config key by its field name (``num_workers``, ``patience``) or as ``section__key`` (``optimizer__lr``).
    ``data`` may also be a whole ``TrainConfig`` (``config()``), taken as it is. An existing run needs
    ``resume`` or ``overwrite``; ``resume`` starts from the run's saved config.yaml, the other layers on top
    (``train(None, "runs/a", resume=True)``), as ``--resume`` does. Returns a ``TrainedRun``: ``best_epoch``, ``test`` (``.float_metrics``,
    ``.reference``: the starting backbone's row) and the ``verdict`` sentence."""
    if resume and read_ensemble_spec(Path(out)) is not None:
        raise ConfigError(f"{out} holds an ensemble; continue it with train_ensemble(cfg, {str(out)!r}, resume=True)")
    request = _train_request(data, out, recipe, config, resume, options, overwrite)
    result = run_train(request, progress=progress, warn=lambda text: log.warning("%s", text))
    assert isinstance(result, TrainedRun)  # a request without members trains one model
    return result


def run_train(
    request: TrainRequest,
    *,
    progress: bool = True,
    ctx: DistContext | None = None,
    stop_check: Callable[[], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> TrainedRun | EnsembleResult | None:
    """The one train use case of ``retrieval train`` and the Python API: the ensemble asked for or saved
    (``members``, resume), the config resolved (``warn`` gets its warnings), both before the run directory is
    claimed, so a bad option replaces nothing; then one fit (``fit_run``) or the ensemble's members. None: an
    ensemble on a rank other than the first."""
    if request.out is None:
        raise ConfigError("training needs the run directory to train into")
    out, resume = request.out, request.resume
    spec = resolve_ensemble(out, request.members, resume=resume)
    if request.ensemble and spec is None:
        raise ConfigError(
            f"{request.spelling.ensemble} needs members (the number of models), or resume=True on an ensemble run"
        )
    cfg = resolve_config(replace(request, ensemble=spec is not None))
    if warn is not None:
        for warning in check_config(cfg):
            warn(warning)
    claim_run_dir(out, resume=resume, overwrite=request.overwrite, spelling=request.spelling.run_dir)
    if spec is None:
        return fit_run(cfg, out, resume=resume, progress=progress, ctx=ctx, stop_check=stop_check)
    return _train_ensemble(cfg, out, spec, progress=progress, ctx=ctx, stop_check=stop_check)


def interrupted_note(out: Path) -> str:
    """What an interrupted run of ``out`` kept, and how to continue it."""
    resume = f"continue with `retrieval train --out {out} --resume`"
    if read_ensemble_spec(out) is not None:
        return (
            f"training interrupted: finished members and the last finished epoch of the current one are kept; {resume}"
        )
    last = RunPaths(out).last_checkpoint
    kept = f"{last} holds the last finished epoch" if last.is_file() else "no epoch had finished"
    return f"training interrupted: {kept}; {resume}"


def _train_request(
    data: PathLike | TrainConfig | None,
    out: PathLike,
    recipe: str | None,
    config: PathLike | None,
    resume: bool,
    options: dict[str, Any],
    overwrite: bool = False,
) -> TrainRequest:
    """The ``TrainRequest`` of a ``train()`` call, as ``retrieval train`` builds it from its options (a whole
    ``TrainConfig`` given as ``data``: taken as it is)."""
    run = TrainRequest(out=Path(out), overwrite=overwrite, resume_from=Path(out) if resume else None, spelling=API)
    if isinstance(data, TrainConfig):
        if recipe or config or options:
            raise ConfigError("train() takes a TrainConfig alone, or data with recipe / config / options")
        return replace(run, config=data)
    arguments = keyword_layer(options)
    if (warning := recipe_loss_warning(recipe, arguments.get("loss", {}).get("name"))) is not None:
        log.warning("%s", warning)
    if data is not None:
        arguments.setdefault("data", {})["path"] = str(data)
    config_file = Path(config) if config is not None else None
    return replace(run, options=arguments, recipe=recipe, config_file=config_file)


def train_ensemble(
    cfg: TrainConfig,
    out: PathLike,
    members: int | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> EnsembleResult | None:
    """``retrieval train --ensemble members``: ``members`` models with different seeds (and, with
    ``cfg.data.meta_classes``, each its own DREML class grouping) in ``out``; ``export`` then joins them into
    one ONNX model. ``resume`` continues an unfinished ensemble (``members`` may then be left out)."""
    resume_from = Path(out) if resume else None
    request = TrainRequest(
        config=cfg,
        ensemble=True,
        spelling=API,
        out=Path(out),
        overwrite=overwrite,
        members=members,
        resume_from=resume_from,
    )
    result = run_train(request, progress=progress)
    assert not isinstance(result, TrainedRun)  # an ensemble request trains members
    return result


def study(
    data: PathLike,
    losses: Sequence[str],
    out: PathLike,
    *,
    overwrite: bool = False,
    progress: bool = True,
    **options: Any,
) -> StudyOutcome:
    """``retrieval study``: the Reality Check protocol for ``losses`` on ``data``, written to ``out`` (study.md,
    study.csv, study.png) and continued where it stopped when ``out`` holds the same study. ``options`` are the
    command's, e.g. ``folds=4, trials=20, seeds=3, cached_features=True, epochs=4, overrides=["loss.lr=0.01"]``:
    those of ``StudySpec`` as they are, the others named after config keys (``keyword_layer``: ``epochs`` is
    ``trainer.epochs``), as the command's ``--epochs`` is."""
    spec = StudySpec.from_keywords(data=str(data), losses=list(losses), **options)
    return run_study(spec, Path(out), overwrite=overwrite, progress=progress)


def export(
    run_dir: PathLike,
    out: PathLike | None = None,
    *,
    fp16: bool = False,
    quantize: Literal["int8"] | None = None,
    max_map_drop: float = 1.0,
    force: bool = False,
) -> ExportResult:
    """ONNX export of the run's best checkpoint to ``out`` (default ``run_dir/export``), parity-checked;
    ``quantize="int8"`` writes the INT8 model instead, if it loses at most ``max_map_drop`` points of
    validation MAP@R (``force`` writes it anyway)."""
    if quantize not in (None, "int8"):
        raise ConfigError(f"unknown quantize {quantize!r}; the one choice is 'int8'")
    int8 = Int8Request(max_map_drop=max_map_drop, force=force) if quantize == "int8" else None
    return export_run(Path(run_dir), Path(out) if out is not None else None, fp16=fp16, int8=int8)


def data_duplicates(
    data: PathLike,
    out: PathLike,
    *,
    model: PathLike | None = None,
    threshold: float | None = None,
    verify: bool = True,
    exclude_list: PathLike | None = None,
    split: SplitSettings = SplitSettings(),
    progress: bool = True,
) -> DatasetCopies:
    """``retrieval data duplicates``: the exact and near copies in ``data``, written to ``out``
        (``duplicates.csv``, ``duplicates.png``; ``exclude_list``: the paths to leave out, one a line). ``model``
        is an export or run directory; without it EfficientNet-Lite0's ImageNet weights (``out/model``, exported
        once with its copy threshold measured on ``data``). ``threshold`` overrides the model's own; ``verify``
    False skips the pixel check of the near candidates."""
    if threshold is not None:
        check_threshold(threshold)
    if model is None:
        model = pretrained_export(Path(out) / PRETRAINED_MODEL_DIR, Path(data), split.val_fraction)
    copies = find_dataset_duplicates(model, data, threshold=threshold, split=split, verify=verify, progress=progress)
    copies.write(Path(out), Path(exclude_list) if exclude_list is not None else None)
    return copies


def data_audit(
    data: PathLike,
    out: PathLike,
    *,
    model: PathLike | None = None,
    exclude_list: PathLike | None = None,
    split: SplitSettings = SplitSettings(),
    progress: bool = True,
) -> AuditReport:
    """``retrieval data audit``: which images of ``data`` are probably mislabelled or belong to no class, written
    to ``out`` (``label_issues.csv``, ``outliers.csv``, ``relabel.csv``, ``audit.json``, ``audit.png``;
    ``exclude_list``: the suspects, one a line). ``model`` is an export or run directory; without it
    EfficientNet-Lite0's ImageNet weights (``out/model``, as ``data_duplicates`` exports them)."""
    if model is None:
        model = pretrained_export(Path(out) / PRETRAINED_MODEL_DIR, Path(data), split.val_fraction)
    return audit_dataset(model, data, out, exclude_list=exclude_list, split=split, progress=progress)
