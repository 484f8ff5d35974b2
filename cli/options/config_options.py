"""Command-line options that stand for config keys: ``--epochs`` is ``trainer.epochs``.

An option is declared once, as ``Annotated[int | None, typer.Option(...), ConfigKey("trainer.epochs")]``
with the default None (= not given). ``config_layer`` turns the options given into the command-line
config layer; ``show_config_defaults`` makes ``--help`` show the default the option stands in for:
the configuration's own, and where a recipe sets the key otherwise, that recipe's value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_type_hints

from typer.models import OptionInfo


@dataclass(frozen=True)
class ConfigKey:
    """Marks a ``train`` option as the command-line spelling of a config key (``section.key``)."""

    path: str


def config_keys(command: Callable[..., Any]) -> dict[str, tuple[ConfigKey, OptionInfo | None]]:
    """Parameter name -> (its config key, its typer option) for every parameter marked with ``ConfigKey``."""
    found = {}
    for name, hint in get_type_hints(command, include_extras=True).items():
        meta = get_args(hint)[1:]
        keys = [m for m in meta if isinstance(m, ConfigKey)]
        if keys:
            found[name] = (keys[0], next((m for m in meta if isinstance(m, OptionInfo)), None))
    return found


def config_layer(command: Callable[..., Any], values: dict[str, Any]) -> dict[str, Any]:
    """The config overrides of the options marked with ``ConfigKey``; options left unset override nothing."""
    layer: dict[str, Any] = {}
    for name, (key, _) in config_keys(command).items():
        if values.get(name) is not None:
            section, field = key.path.split(".")
            value = values[name]
            layer.setdefault(section, {})[field] = str(value) if isinstance(value, Path) else value
    return layer


def show_config_defaults(command: Callable[..., Any]) -> None:
    """Set each config-key option's ``--help`` default (unless it declares its own) to ``default_text``.

    Under ``from __future__ import annotations`` each evaluation of the annotations makes new option
    objects, so the evaluated ones are stored back on ``command`` for typer to build the command from.
    """
    command.__annotations__.update(get_type_hints(command, include_extras=True))
    for key, option in config_keys(command).values():
        if option is not None and not isinstance(option.show_default, str):
            option.show_default = default_text(key.path)


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
