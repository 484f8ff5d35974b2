"""The one option vocabulary of training: ``TRAIN_OPTIONS``, option name -> config key.

An option's name is its Python keyword (``train(..., workers=0)``) and, ``_`` written ``-``, its
command-line flag (``--workers``); it stands for one config key (``data.num_workers``) and its help is
that key's description in ``TrainConfig``. ``retrieval train`` and ``retrieval study`` declare their
flags from this table (``cli.options.train_options.config_option``); the Python API's ``train()`` and
``study()`` read their keywords through ``keyword_layer``, which takes the table's names and also a key's
own field name where one section has it (``num_workers``) or ``section__key`` (``optimizer__lr``).
Torch-free, so ``--help`` reads it without torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import TrainConfig


@dataclass(frozen=True)
class TrainOption:
    """One option of ``retrieval train`` and the Python API's ``train()``: its name and its config key.

    ``show_default``: what ``--help`` shows as the default where the config's and the recipes' defaults
    would not say it (the loss a recipe brings); None: those defaults (``config_options.default_text``).
    """

    name: str
    key: str
    show_default: str | None = None

    @property
    def flag(self) -> str:
        """The command-line spelling of the name: ``max_images_per_class`` -> ``--max-images-per-class``."""
        return "--" + self.name.replace("_", "-")

    @property
    def help(self) -> str:
        """The config key's description as a sentence: the flag's ``--help`` and the keyword's meaning."""
        text = key_description(self.key)
        if text.split(" ", 1)[0].isalpha():  # a sentence, as the other options' help ("resnet18, ..." stays)
            text = text[:1].upper() + text[1:]
        return text if text.endswith(".") else text + "."


TRAIN_OPTIONS: dict[str, TrainOption] = {
    option.name: option
    for option in (
        TrainOption("data", "data.path"),
        TrainOption("loss", "loss.name", show_default="normalized_softmax; --recipe: its loss"),
        TrainOption("backbone", "model.backbone"),
        TrainOption("embedding_dim", "model.embedding_dim"),
        TrainOption("image_size", "data.image_size"),
        TrainOption("epochs", "trainer.epochs"),
        TrainOption("batch_size", "trainer.batch_size"),
        TrainOption("max_images_per_class", "data.max_images_per_class"),
        TrainOption("exclude", "data.exclude"),
        TrainOption("images_per_class", "data.images_per_class"),
        TrainOption("lr", "optimizer.lr"),
        TrainOption("device", "trainer.device"),
        TrainOption("pretrained", "model.pretrained"),
        TrainOption("allow_download", "model.allow_download"),
        TrainOption("weights_cache", "model.weights_cache"),
        TrainOption("split", "data.split"),
        TrainOption("final_fit", "trainer.final_fit"),
        TrainOption("val_fraction", "data.val_fraction"),
        TrainOption("val_fold", "data.val_fold"),
        TrainOption("workers", "data.num_workers"),
        TrainOption("on_bad_image", "data.on_bad_image"),
        TrainOption("seed", "trainer.seed"),
        TrainOption("meta_classes", "data.meta_classes"),
        TrainOption("max_steps_per_epoch", "trainer.max_steps_per_epoch"),
        TrainOption("tensorboard", "trainer.tensorboard"),
    )
}
NAMED_SECTIONS = ("loss", "optimizer", "schedule")  # loss="triplet" is loss.name, as --loss is


def key_description(key: str) -> str:
    """The description ``TrainConfig`` gives the key ``section.key`` (every option's key has one)."""
    section, field = key.split(".")
    description = _fields_of(TrainConfig.model_fields[section])[field].description
    if not description:
        raise ValueError(f"config key {key} has no description: give its Field one, it is an option's help")
    return str(description)


def options_layer(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The config layer of the table's options given by name (``workers=0`` -> data.num_workers); an option
    left None (not given) sets nothing."""
    layer: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        if value is not None:
            section, field = TRAIN_OPTIONS[name].key.split(".")
            layer.setdefault(section, {})[field] = value
    return layer


def keyword_layer(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A config layer from keywords: ``epochs=3`` -> {"trainer": {"epochs": 3}}.

    A keyword is an option's name (``workers``, ``lr``: the command line's flags), a key's field name
    where that name belongs to one section only (``num_workers``, ``patience``), ``section__key``
    (``optimizer__lr``, ``loss__lr``), or ``loss`` / ``optimizer`` / ``schedule`` for that section's
    ``name``. Two keywords naming the same key are refused. The Python API's train() and study() read
    their options this way.
    """
    layer: dict[str, dict[str, Any]] = {}
    given: dict[str, str] = {}
    for keyword, value in values.items():
        key = keyword_key(keyword)
        if key in given:
            raise ConfigError(f"{given[key]} and {keyword} both set {key}; give one of them")
        given[key] = keyword
        section, field = key.split(".")
        layer.setdefault(section, {})[field] = value
    return layer


def keyword_key(keyword: str) -> str:
    """The config key (``section.key``) a keyword stands for; an unknown keyword is a ConfigError."""
    name = keyword.replace("-", "_")
    section, _, field = name.partition("__")
    if name in TRAIN_OPTIONS:
        return TRAIN_OPTIONS[name].key
    if field:
        if section not in TrainConfig.model_fields or field not in _fields_of(TrainConfig.model_fields[section]):
            raise ConfigError(f"unknown option {keyword!r}: {section}.{field} is not a configuration key")
        return f"{section}.{field}"
    if name in NAMED_SECTIONS:
        return f"{name}.name"
    sections = [title for title, value in TrainConfig.model_fields.items() if name in _fields_of(value)]
    if len(sections) != 1:
        where = f"it is a key of {', '.join(sections)}" if sections else _closest_keyword(name)
        raise ConfigError(f"unknown option {keyword!r} ({where}); write SECTION__KEY, e.g. trainer__epochs")
    return f"{sections[0]}.{name}"


def _closest_keyword(keyword: str) -> str:
    """'no section has this key', and the closest name if one is near (``epoch`` -> ``epochs``)."""
    known = {key for field in TrainConfig.model_fields.values() for key in _fields_of(field)}
    known |= set(NAMED_SECTIONS) | set(TRAIN_OPTIONS)
    close = difflib.get_close_matches(keyword, sorted(known), n=1)
    return f"did you mean {close[0]}?" if close else "no section has this key"


def _fields_of(field: Any) -> dict[str, Any]:
    annotation = field.annotation
    return annotation.model_fields if isinstance(annotation, type) and issubclass(annotation, BaseModel) else {}
