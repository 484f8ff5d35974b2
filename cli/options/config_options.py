"""Command-line options that stand for config keys: ``--epochs`` is ``trainer.epochs``.

Each is an option of ``TRAIN_OPTIONS`` (``training.config.option_vocabulary``, the one vocabulary the
Python API reads too), declared as ``Annotated[int | None, config_option("epochs")]`` with the default
None (= not given): the flag, the key and the help come from the table. ``config_layer`` turns the
options given into the command-line config layer; ``show_config_defaults`` makes ``--help`` show the
default the option stands in for: the configuration's own, and where a recipe sets the key otherwise,
that recipe's value.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_type_hints

from typer.models import OptionInfo

from retrieval.training.config.option_vocabulary import TRAIN_OPTIONS, TrainOption, options_layer


class ConfigOption(OptionInfo):
    """A typer option that is the command-line spelling of one ``TRAIN_OPTIONS`` entry."""

    def __init__(self, option: TrainOption) -> None:
        super().__init__(
            default=...,
            param_decls=(option.flag,),
            help=option.help,
            show_default=option.show_default if option.show_default is not None else True,
        )
        self.option = option


def config_option(name: str) -> ConfigOption:
    """The typer option of the option ``name`` of ``TRAIN_OPTIONS``: its flag, its key's description."""
    return ConfigOption(TRAIN_OPTIONS[name])


def config_keys(command: Callable[..., Any]) -> dict[str, ConfigOption]:
    """Parameter name -> its ``ConfigOption`` for every parameter declared with ``config_option``."""
    found = {}
    for name, hint in get_type_hints(command, include_extras=True).items():
        options = [m for m in get_args(hint)[1:] if isinstance(m, ConfigOption)]
        if options:
            found[name] = options[0]
    return found


def config_layer(command: Callable[..., Any], values: dict[str, Any]) -> dict[str, Any]:
    """The config overrides of the command's config options; options left unset override nothing."""
    given = {option.option.name: values.get(name) for name, option in config_keys(command).items()}
    return options_layer({name: str(v) if isinstance(v, Path) else v for name, v in given.items()})


def show_config_defaults(command: Callable[..., Any]) -> None:
    """Set each config-key option's ``--help`` default (unless it declares its own) to ``default_text``.

    Under ``from __future__ import annotations`` each evaluation of the annotations makes new option
    objects, so the evaluated ones are stored back on ``command`` for typer to build the command from.
    """
    command.__annotations__.update(get_type_hints(command, include_extras=True))
    for option in config_keys(command).values():
        if not isinstance(option.show_default, str):
            option.show_default = default_text(option.option.key)


def default_text(path: str) -> str:
    """``TrainConfig``'s default of ``path``, then each recipe that sets it to another value, e.g.
    ``10; --recipe zhai_wu: 31``."""
    from retrieval.training.config.recipe_tables import recipe_values
    from retrieval.training.config.train_config import config_default

    default = config_default(path)
    others = [f"--recipe {name}: {_shown(value)}" for name, value in recipe_values(path).items() if value != default]
    return "; ".join([_shown(default), *others])


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)
