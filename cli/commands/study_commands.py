"""``retrieval study``: compare losses with the Reality Check protocol, in one resumable command."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.activity import activity, show_run_log
from retrieval.cli.options.config_options import config_layer, show_config_defaults
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
    data: Annotated[
        Path, typer.Option("--data", help="ImageFolder dir, CSV manifest, or CUB/Cars196/SOP/In-Shop root.")
    ],
    losses: Annotated[
        str, typer.Option("--losses", help="Comma-separated loss or recipe names, e.g. normsoftmax,triplet,ms.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Study directory (state, optuna.db, runs, report).")],
    folds: Annotated[int, typer.Option("--folds", help="Class-disjoint folds of the training classes.")] = 4,
    trials: Annotated[int, typer.Option("--trials", help="Search trials per loss (the paper: 50).")] = 20,
    seeds: Annotated[int, typer.Option("--seeds", help="Final runs of the best settings (the paper: 10).")] = 3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sampler and the search runs.")] = 0,
    cached_features: Annotated[
        bool,
        typer.Option("--cached-features", help="Frozen backbone: train only head + loss on features embedded once."),
    ] = False,
    epochs: Epochs = None,
    image_size: ImageSize = None,
    max_images_per_class: MaxImagesPerClass = None,
    backbone: Backbone = None,
    pretrained: Pretrained = None,
    allow_download: AllowDownload = None,
    weights_cache: WeightsCache = None,
    embedding_dim: EmbeddingDim = None,
    batch_size: BatchSize = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Any config key for every run (--set trainer.patience=5) or for one loss (--set "
            "triplet:loss.params.margin=0.1); a searched key set here is fixed.",
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace the study in --out (keeps its feature cache).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    show_run_log()
    options = config_layer(study, locals())
    assignments = parse_set([item.split(":", 1)[-1] for item in set_ or []])  # "loss:key=value" sets key too
    layers = [("command-line options", options), ("--set", assignments), ("--data", {"data": {"path": str(data)}})]
    for warning in check_config(build_config(layers), consent=consent_command(), split=False):  # before torch
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)
    with activity("loading torch and the training code", enabled=not quiet):
        from retrieval.training.study.runner import run_study
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
