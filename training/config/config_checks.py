"""Checks of a resolved ``TrainConfig`` made before torch loads (it takes seconds to import): a missing
dataset, a layout nobody can read, classes too few for the run's split and an image size no backbone can
use fail at once, in one sentence.

``check_config`` raises for what cannot train and returns warnings for what trains badly: ``retrieval
train`` and ``retrieval study`` call it before importing torch, and the Python API's ``train`` before
training.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.common.artifact_names import RUN_CHECKPOINTS_SUBDIR, RUN_CONFIG_NAME
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.class_check import class_problems
from retrieval.indexing.data.sources import detect_layout
from retrieval.training.config.hub_access import API_CONSENT, check_hub_consent
from retrieval.training.config.image_sizes import check_image_size
from retrieval.training.config.known_names import check_names
from retrieval.training.config.recipe_tables import loss_of_recipe
from retrieval.training.config.run_split import capped_records, run_split
from retrieval.training.config.train_config import TrainConfig

PRETRAINED_MIN_SIZE = 96
"""ImageNet weights were trained at 224 px (EfficientNet-Lite1/2: 240/260); well below 96 px their
features lose most of what made them useful."""


def check_config(
    cfg: TrainConfig,
    *,
    needs_data: bool = True,
    recipe: str | None = None,
    consent: str = API_CONSENT,
    split: bool = True,
) -> list[str]:
    """Raise ConfigError or DataError for what cannot train; return warnings (sentences) for what trains badly.
    ``consent``: the command that reruns this one with consent to download hub weights (``hub_access``);
    ``split``: whether the run splits the data as ``data`` says (``retrieval study`` cuts its own folds)."""
    check_names(recipe=recipe, loss=cfg.loss.name, backbone=cfg.model.backbone)
    if needs_data:  # a run, not --print-config
        check_hub_consent(cfg.model, consent)
    size = cfg.data.image_size
    check_image_size(cfg.model.backbone, size)
    warnings = _data_warnings(cfg, split=split) if needs_data else []
    if cfg.model.pretrained and size < PRETRAINED_MIN_SIZE:
        warnings.append(
            f"data.image_size {size} px is small for pretrained weights (trained at 224 px): expect them to help "
            f"less; {PRETRAINED_MIN_SIZE} px or more keeps most of their features (images are resized to it)"
        )
    return warnings


def _data_warnings(cfg: TrainConfig, *, split: bool) -> list[str]:
    """The dataset exists, is a known layout, has images and (``split``) classes enough for the run's split
    (DataError otherwise); what its classes lack."""
    if cfg.data.path is None:
        raise ConfigError("no dataset given: pass --data PATH (an ImageFolder directory, a CSV or a dataset root)")
    layout = detect_layout(cfg.data.path)
    records = layout.load(cfg.data.path)
    warnings = class_problems(cfg.data.path, records, layout=layout.name)
    if split:
        run_split(capped_records(records, cfg.data), cfg.data)
    return warnings


CLI_SPELLING = ("--resume", "--overwrite")
API_SPELLING = ("resume=True", "overwrite=True")


def check_run_dir(run_dir: Path, *, resume: bool, overwrite: bool, spelling: tuple[str, str] = CLI_SPELLING) -> bool:
    """Whether ``run_dir`` holds a run to replace; ConfigError when it holds one and neither flag was given
    (``spelling``: how the caller writes the two, ``--resume`` on the command line, ``resume=True`` in Python)."""
    run_dir = Path(run_dir)
    held = (run_dir / RUN_CONFIG_NAME).is_file() or (run_dir / RUN_CHECKPOINTS_SUBDIR).is_dir()
    if resume or not held:
        return False
    if not overwrite:
        raise ConfigError(
            f"{run_dir} already holds a training run; pass {spelling[0]} to continue it "
            f"or {spelling[1]} to replace it (its checkpoints and export are deleted)"
        )
    return True


def recipe_loss_warning(recipe: str | None, loss: str | None) -> str | None:
    """A sentence when ``--loss`` replaces the loss of ``--recipe`` (the recipe's other settings stay)."""
    if not recipe or not loss:
        return None
    recipe_loss = loss_of_recipe(recipe)
    if loss_of_recipe(loss) == recipe_loss:
        return None
    return (
        f"--loss {loss} replaces the loss of --recipe {recipe} ({recipe_loss}) but keeps the recipe's other "
        f"settings, which were chosen for {recipe_loss}; for {loss}'s own defaults use --recipe {loss} "
        "(`retrieval losses` lists what each recipe sets)"
    )
