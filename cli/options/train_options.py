"""The options of ``retrieval train`` and ``retrieval study`` that stand for config keys, one alias each.

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


def consent_command() -> str:
    """This command line again with ``--allow-download``: what a refusal to download tells the user to run."""
    return shlex.join(["retrieval", *sys.argv[1:], "--allow-download"])
