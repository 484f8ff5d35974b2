"""One option vocabulary: every ``retrieval train`` flag that stands for a config key is an option of
``TRAIN_OPTIONS``, the Python API's ``train()`` takes the same name as a keyword, and both resolve it to
the same config key and value; today's keyword names (``num_workers``, ``optimizer__lr``) still work."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
import typer
import yaml
from typer.testing import CliRunner

from retrieval.cli.commands.study_commands import study
from retrieval.cli.commands.train_commands import train
from retrieval.cli.main import app
from retrieval.cli.options.config_options import config_keys
from retrieval.indexing.common.errors import ConfigError
from retrieval.training import usecases as api
from retrieval.training.config.config_resolver import resolve_config
from retrieval.training.config.option_vocabulary import TRAIN_OPTIONS, key_description, keyword_key, keyword_layer
from retrieval.training.config.train_config import TrainConfig

# a value of each option's type that differs from the default and passes validation (bools: the flag given)
VALUES: dict[str, Any] = {
    "data": "photos",
    "loss": "triplet",
    "backbone": "resnet34",
    "embedding_dim": 48,
    "image_size": 64,
    "epochs": 3,
    "batch_size": 12,
    "max_images_per_class": 7,
    "exclude": "duplicates.txt",
    "images_per_class": 3,
    "lr": 0.003,
    "device": "cpu",
    "pretrained": "imagenet",
    "allow_download": True,
    "weights_cache": "weights",
    "split": "none",
    "final_fit": True,
    "val_fraction": 0.3,
    "val_fold": 1,
    "workers": 0,
    "on_bad_image": "fail",
    "seed": 5,
    "meta_classes": 6,
    "max_steps_per_epoch": 9,
    "tensorboard": True,
}


def _train_flags() -> dict[str, str]:
    """Parameter name -> flag of every ``retrieval train`` option that stands for a config key, read from
    the click command typer builds (what the user meets)."""
    group = typer.main.get_command(app)
    command = group.get_command(typer.Context(group), "train")  # type: ignore[attr-defined]
    keyed = config_keys(train)
    return {param.name: param.opts[0] for param in command.params if param.name in keyed}


def _cli_config(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["train", "--print-config", *args])
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.stdout)


def _api_config(**options: Any) -> dict[str, Any]:
    data = options.pop("data", None)
    return resolve_config(api._train_request(data, Path("run"), None, None, False, options)).model_dump(mode="json")


def test_every_train_flag_is_a_table_option_named_as_its_api_keyword() -> None:
    flags = _train_flags()
    assert set(flags) == set(TRAIN_OPTIONS) == set(VALUES)  # every table option is a flag, and back
    for name, flag in flags.items():
        assert flag == "--" + name.replace("_", "-")  # the keyword is the flag, - written _
        assert config_keys(train)[name].option is TRAIN_OPTIONS[name]
        assert keyword_key(name) == TRAIN_OPTIONS[name].key


def test_the_cli_and_the_api_resolve_every_option_to_the_same_key_and_value() -> None:
    args: list[str] = []
    for name, value in VALUES.items():
        flag = "--" + name.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    cli = _cli_config(*args)
    python = _api_config(**VALUES)
    assert cli == python
    for name, value in VALUES.items():  # each key holds the value given, hand-read from the table
        section, key = TRAIN_OPTIONS[name].key.split(".")
        assert cli[section][key] == value, name
    assert (cli["data"]["num_workers"], cli["optimizer"]["lr"], cli["loss"]["name"]) == (0, 0.003, "triplet")


@pytest.mark.parametrize("name", sorted(VALUES))
def test_each_option_alone_reaches_the_same_key_in_both(name: str) -> None:
    value = VALUES[name]
    flag = "--" + name.replace("_", "-")
    cli = _cli_config(*([flag] if value is True else [flag, str(value)]))
    assert cli == _api_config(**{name: value})
    assert cli != TrainConfig().model_dump(mode="json")  # the option changed something


def test_todays_keyword_names_still_work_and_mean_the_same() -> None:
    assert keyword_layer({"workers": 0, "lr": 0.5}) == {"data": {"num_workers": 0}, "optimizer": {"lr": 0.5}}
    assert keyword_layer({"num_workers": 0, "optimizer__lr": 0.5}) == keyword_layer({"workers": 0, "lr": 0.5})
    assert keyword_layer({"loss__lr": 0.1, "loss": "triplet"}) == {"loss": {"lr": 0.1, "name": "triplet"}}
    assert keyword_layer({"patience": 3}) == {"trainer": {"patience": 3}}  # a key no option names


def test_two_names_for_one_key_or_an_unknown_name_are_refused_in_a_sentence() -> None:
    with pytest.raises(ConfigError, match=r"^workers and num_workers both set data\.num_workers; give one of them$"):
        keyword_layer({"workers": 0, "num_workers": 1})
    with pytest.raises(ConfigError, match=r"unknown option 'epoch' \(did you mean epochs\?\)"):
        keyword_layer({"epoch": 3})
    with pytest.raises(ConfigError, match=r"unknown option 'name' \(it is a key of loss, optimizer, schedule\)"):
        keyword_layer({"name": "x"})


def test_each_flag_says_its_config_keys_description() -> None:
    group = typer.main.get_command(app)
    command = group.get_command(typer.Context(group), "train")  # type: ignore[attr-defined]
    helps = {param.name: param.help for param in command.params}
    for name, option in TRAIN_OPTIONS.items():
        description = key_description(option.key)
        sentence = description if description.endswith(".") else description + "."
        assert helps[name] in (sentence, sentence[:1].upper() + sentence[1:]), name
        assert helps[name][0].isupper() or not helps[name].split(" ", 1)[0].isalpha(), name  # a sentence


def test_study_declares_its_config_options_from_the_same_table() -> None:
    hints = get_type_hints(study, include_extras=True)
    keyed = config_keys(study)
    assert {"epochs", "backbone", "batch_size"} <= set(keyed)
    for name, option in keyed.items():
        assert option.option is TRAIN_OPTIONS[name]
        assert get_args(hints[name])[0] is not None
