"""``retrieval study``: compare losses with the Reality Check protocol, in one resumable command."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from retrieval.cli.activity import activity, show_run_log
from retrieval.cli.options.config_options import config_layer, show_config_defaults
from retrieval.cli.options.study_options import (
    CachedFeaturesOpt,
    FoldsOpt,
    LossesOpt,
    SeedsOpt,
    StudyDataOpt,
    StudyOutOpt,
    StudyOverwriteOpt,
    StudyQuietOpt,
    StudySeedOpt,
    StudySetOpt,
    TrialsOpt,
)
from retrieval.cli.options.train_options import (
    AllowDownload,
    Backbone,
    BatchSize,
    EmbeddingDim,
    Epochs,
    ImageSize,
    MaxImagesPerClass,
    Pretrained,
    WeightsCache,
    consent_command,
)
from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.config_checks import check_config
from retrieval.training.config.train_config import build_config, parse_set

if TYPE_CHECKING:  # torch loads only when the study runs
    from retrieval.training.study.study_state import StudySpec

STUDY_HELP = (
    "Compare losses fairly, as 'A Metric Learning Reality Check' (Musgrave et al., ECCV 2020) does.\n\n"
    "The training classes are cut into --folds contiguous, class-disjoint folds. For each loss, --trials "
    "trials of optuna's TPE sampler search its declared hyperparameters and learning rates, maximising the "
    "mean validation MAP@R over the folds (each fold model trains on the other folds and keeps its best "
    "validation epoch). The best settings are then trained --seeds times on every fold, and each fold model "
    "embeds the test classes once (never during the search). OUT/study.md, study.csv and study.png report "
    "test MAP@R, R-precision and P@1 as mean +- 95% confidence interval, 'concatenated' (the fold models "
    "joined) and 'separated' (each alone, averaged), float and binary, next to the pretrained backbone's "
    "own features.\n\n"
    "Rerunning the same command continues where it stopped (the search is an SQLite optuna storage in OUT); "
    "a different command against the same OUT is refused unless --overwrite.\n\n"
    "--cached-features freezes the backbone: every image is embedded once (cached in OUT/features/), then "
    "each trial trains only the head and the loss, in seconds on a CPU. That is a different protocol from "
    "full fine-tuning, and the report says so."
)


def study(
    data: StudyDataOpt,
    losses: LossesOpt,
    out: StudyOutOpt,
    folds: FoldsOpt = 4,
    trials: TrialsOpt = 20,
    seeds: SeedsOpt = 3,
    seed: StudySeedOpt = 0,
    cached_features: CachedFeaturesOpt = False,
    epochs: Epochs = None,
    image_size: ImageSize = None,
    max_images_per_class: MaxImagesPerClass = None,
    backbone: Backbone = None,
    pretrained: Pretrained = None,
    allow_download: AllowDownload = None,
    weights_cache: WeightsCache = None,
    embedding_dim: EmbeddingDim = None,
    batch_size: BatchSize = None,
    set_: StudySetOpt = None,
    overwrite: StudyOverwriteOpt = False,
    quiet: StudyQuietOpt = False,
) -> None:
    show_run_log()
    options = config_layer(study, locals())
    _warn_before_torch(options, set_, data)
    with activity("loading torch and the training code", enabled=not quiet):
        from retrieval.training.study.runner import run_study  # noqa: F401 (loaded here, under the activity line)
        from retrieval.training.study.study_state import StudySpec
    names = parse_losses(losses)
    spec = StudySpec(
        data=str(data.resolve()),
        losses=names,
        folds=_at_least(folds, 2, "--folds"),
        trials=_at_least(trials, 1, "--trials"),
        seeds=_at_least(seeds, 1, "--seeds"),
        seed=seed,
        cached_features=cached_features,
        options=options,
        overrides=list(set_ or []),
    )
    _run(spec, out, overwrite=overwrite, quiet=quiet)


def _warn_before_torch(options: dict[str, Any], set_: list[str] | None, data: Path) -> None:
    """Refuse bad config keys and values, and print the warnings, before torch loads."""
    assignments = parse_set([item.split(":", 1)[-1] for item in set_ or []])  # "loss:key=value" sets key too
    layers = [("command-line options", options), ("--set", assignments), ("--data", {"data": {"path": str(data)}})]
    for warning in check_config(build_config(layers), consent=consent_command(), split=False):
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)


def _run(spec: StudySpec, out: Path, *, overwrite: bool, quiet: bool) -> None:
    """Run (or continue) the study, then print its report and where it is."""
    from retrieval.training.study.runner import run_study

    started = time.perf_counter()
    try:
        result = run_study(spec, out, overwrite=overwrite, progress=not quiet)
    except KeyboardInterrupt:
        typer.secho(
            "study interrupted: finished trials and final runs are kept; rerun the same command to continue", err=True
        )
        raise
    typer.echo((out / "study.md").read_text())
    typer.echo(f"study finished in {time.perf_counter() - started:.0f} s: {result.out}/study.md, study.csv, study.png")


def parse_losses(text: str) -> list[str]:
    """Comma-separated recipe names, each known (a ConfigError lists the known ones) and given once."""
    from retrieval.training.config.recipes import recipe_registry

    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ConfigError("--losses needs at least one loss name, e.g. --losses normsoftmax,triplet")
    registry = recipe_registry()
    for name in names:
        registry.get(name)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"--losses names {', '.join(repeated)} more than once")
    return names


def _at_least(value: int, low: int, option: str) -> int:
    if value < low:
        raise ConfigError(f"{option} must be at least {low}, got {value}")
    return value


def register(app: typer.Typer) -> None:
    show_config_defaults(study)
    app.command("study", help=STUDY_HELP)(study)
