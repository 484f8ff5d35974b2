"""The options of ``retrieval train`` and ``retrieval study`` that stand for config keys, one alias each, and
``train``'s own options (``...Opt``: the run directory, the config layers, the run's switches).

Each is ``Annotated[type | None, config_option(name)]``: the flag, the config key and the help come from
``TRAIN_OPTIONS`` (``training.config.option_vocabulary``), the table the Python API's keywords are read
through as well, so ``--workers`` and ``train(workers=...)`` are one option. A command names the
parameter after the option (``workers: Workers = None``; ``tests/test_option_vocabulary.py`` checks it);
``config_layer(command, values)`` turns the ones given into the command-line config layer.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.options.config_options import config_option

Data = Annotated[Path | None, config_option("data")]
Loss = Annotated[str | None, config_option("loss")]
Backbone = Annotated[str | None, config_option("backbone")]
Pretrained = Annotated[str | None, config_option("pretrained")]
AllowDownload = Annotated[bool | None, config_option("allow_download")]
WeightsCache = Annotated[str | None, config_option("weights_cache")]
EmbeddingDim = Annotated[int | None, config_option("embedding_dim")]
ImageSize = Annotated[int | None, config_option("image_size")]
Epochs = Annotated[int | None, config_option("epochs")]
BatchSize = Annotated[int | None, config_option("batch_size")]
MaxImagesPerClass = Annotated[int | None, config_option("max_images_per_class")]
Exclude = Annotated[Path | None, config_option("exclude")]
ImagesPerClass = Annotated[int | None, config_option("images_per_class")]
Lr = Annotated[float | None, config_option("lr")]
Device = Annotated[str | None, config_option("device")]
Split = Annotated[str | None, config_option("split")]
FinalFit = Annotated[bool | None, config_option("final_fit")]
ValFraction = Annotated[float | None, config_option("val_fraction")]
ValFold = Annotated[int | None, config_option("val_fold")]
Workers = Annotated[int | None, config_option("workers")]
OnBadImage = Annotated[str | None, config_option("on_bad_image")]
Seed = Annotated[int | None, config_option("seed")]
MetaClasses = Annotated[int | None, config_option("meta_classes")]
MaxStepsPerEpoch = Annotated[int | None, config_option("max_steps_per_epoch")]
Tensorboard = Annotated[bool | None, config_option("tensorboard")]

TrainOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Run directory (config, metrics.jsonl, checkpoints, curves.png); required, except with --print-config.",
        show_default="none",
    ),
]
ConfigFileOpt = Annotated[
    Path | None, typer.Option("--config", help="YAML config; CLI options override it.", show_default="none")
]
RecipeOpt = Annotated[
    str | None,
    typer.Option(
        "--recipe",
        help="Start from a loss's paper defaults on a shared base, e.g. normsoftmax, triplet; "
        "zhai_wu: Zhai & Wu's own setup.",
        show_default="none: the configuration's defaults",
    ),
]
EnsembleOpt = Annotated[
    int | None,
    typer.Option(
        "--ensemble",
        help="Train L models (seeds seed..seed+L-1) into RUN_DIR/members/ and evaluate their joined "
        "embedding (L x embedding-dim); `retrieval export` writes them as one model.",
        show_default="none: one model",
    ),
]
TrainSetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Any config key, e.g. --set trainer.patience=3 (repeatable).", show_default="none"),
]
PrintConfigOpt = Annotated[
    bool,
    typer.Option(
        "--print-config", help="Print the resolved configuration as YAML and exit (reads no data, writes nothing)."
    ),
]
TrainOverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace the run already in --out (its checkpoints and export).")
]
ResumeOpt = Annotated[
    bool, typer.Option("--resume", help="Continue from RUN_DIR/checkpoints/last.pt with its saved config.")
]
TrainQuietOpt = Annotated[
    bool, typer.Option("--quiet", help="No progress bars (the run summary and results still print).")
]


def consent_command() -> str:
    """This command line again with ``--allow-download``: what a refusal to download tells the user to run."""
    return shlex.join(["retrieval", *sys.argv[1:], "--allow-download"])
