"""``retrieval study``'s own options, one alias each (the config-key ones it shares with ``train``:
``train_options``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

StudyDataOpt = Annotated[
    Path, typer.Option("--data", help="ImageFolder dir, CSV manifest, or CUB/Cars196/SOP/In-Shop root.")
]
LossesOpt = Annotated[
    str, typer.Option("--losses", help="Comma-separated loss or recipe names, e.g. normsoftmax,triplet,ms.")
]
StudyOutOpt = Annotated[Path, typer.Option("--out", help="Study directory (state, optuna.db, runs, report).")]
FoldsOpt = Annotated[int, typer.Option("--folds", help="Class-disjoint folds of the training classes.")]
TrialsOpt = Annotated[int, typer.Option("--trials", help="Search trials per loss (the paper: 50).")]
SeedsOpt = Annotated[int, typer.Option("--seeds", help="Final runs of the best settings (the paper: 10).")]
StudySeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the sampler and the search runs.")]
CachedFeaturesOpt = Annotated[
    bool,
    typer.Option("--cached-features", help="Frozen backbone: train only head + loss on features embedded once."),
]
StudySetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Any config key for every run (--set trainer.patience=5) or for one loss (--set "
        "triplet:loss.params.margin=0.1); a searched key set here is fixed.",
    ),
]
StudyOverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace the study in --out (keeps its feature cache).")
]
StudyQuietOpt = Annotated[bool, typer.Option("--quiet", help="No progress bars.")]
