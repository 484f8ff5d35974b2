"""Options that ``retrieval train`` and ``retrieval study`` share, each declared once with its config key.

A command lists them in its signature (``epochs: Epochs = None``); ``config_layer(command, values)``
turns the ones given into the command-line config layer, so both commands read ``--epochs`` as
``trainer.epochs`` through the same ``ConfigKey`` and neither keeps a table of its own.
"""

from __future__ import annotations

import shlex
import sys
from typing import Annotated

import typer

from retrieval.cli.options.config_options import ConfigKey

Backbone = Annotated[
    str | None,
    typer.Option(
        "--backbone",
        help="resnet18, resnet50, densenet121, efficientnet_lite0, ... (`retrieval backbones`) or timm:NAME for any timm model.",
    ),
    ConfigKey("model.backbone"),
]
Pretrained = Annotated[
    str | None,
    typer.Option(
        "--pretrained",
        help="'imagenet' (built-in or locally cached ImageNet weights, never downloads), 'torchvision', 'hub' (a "
        "vision transformer's weights from the Hugging Face hub: cached, or downloaded with --allow-download) or a "
        "weights file (.safetensors, .pth, .bin).",
    ),
    ConfigKey("model.pretrained"),
]
AllowDownload = Annotated[
    bool | None,
    typer.Option(
        "--allow-download",
        help="Let --pretrained hub download weights that are not cached (with a progress bar, its size shown "
        "first, its checksum verified); also RETRIEVAL_ALLOW_DOWNLOAD=1.",
        show_default="off",
    ),
    ConfigKey("model.allow_download"),
]
WeightsCache = Annotated[
    str | None,
    typer.Option(
        "--weights-cache",
        help="Folder of the hub weights: where --pretrained hub downloads them and where --pretrained imagenet "
        "looks for a transformer's or timm model's; also RETRIEVAL_WEIGHTS_CACHE; none: the Hugging Face cache "
        "(HF_HUB_CACHE).",
        show_default="none",
    ),
    ConfigKey("model.weights_cache"),
]
EmbeddingDim = Annotated[
    int | None,
    typer.Option("--embedding-dim", help="Embedding size (bits of the binary index)."),
    ConfigKey("model.embedding_dim"),
]
ImageSize = Annotated[
    int | None,
    typer.Option("--image-size", help="Crop size in pixels (eval resizes to size*8/7 first)."),
    ConfigKey("data.image_size"),
]
Epochs = Annotated[int | None, typer.Option("--epochs", help="Training epochs."), ConfigKey("trainer.epochs")]
BatchSize = Annotated[
    int | None,
    typer.Option(
        "--batch-size", help="Images per step in each process (torchrun: the global batch is processes x this)."
    ),
    ConfigKey("trainer.batch_size"),
]
MaxImagesPerClass = Annotated[
    int | None,
    typer.Option(
        "--max-images-per-class",
        help="Keep at most this many images of each class (a deterministic subsample, in every split).",
    ),
    ConfigKey("data.max_images_per_class"),
]


def consent_command() -> str:
    """This command line again with ``--allow-download``: what a refusal to download tells the user to run."""
    return shlex.join(["retrieval", *sys.argv[1:], "--allow-download"])
