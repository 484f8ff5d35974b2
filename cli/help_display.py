"""How ``--help`` shows flags: ``--quiet``, not ``--quiet <bool>``.

Recent typer releases print every option's type next to it, ``<bool>`` included, so an on/off
flag such as ``--overwrite`` reads as if it took a value (``--overwrite true``), which it does not.
An empty metavar leaves a flag's type column blank; ``show_flags_as_flags`` applies it to every
command and group of an app (``--help`` and ``--version`` included), so no declaration needs to.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


def _blank_flag_types(params: list[Any]) -> list[Any]:
    for param in params:
        if getattr(param, "is_bool_flag", False) and param.metavar is None:
            param.metavar = ""  # typer shows the metavar, when set, instead of the type
    return params


class FlagCommand(TyperCommand):
    """A typer command whose flags show no type in ``--help``."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _blank_flag_types(super().get_params(ctx))


class FlagGroup(TyperGroup):
    """A typer group (``retrieval``, ``retrieval index``) whose flags show no type in ``--help``."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _blank_flag_types(super().get_params(ctx))


def show_flags_as_flags(app: typer.Typer) -> None:
    """Give ``app``, its commands and its sub-apps the flag-aware classes (where typer's own were left)."""
    if app.info.cls in (None, TyperGroup) or not isinstance(app.info.cls, type):  # or typer's "unset" placeholder
        app.info.cls = FlagGroup
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):  # typer fills in its own class when none is chosen
            command.cls = FlagCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            show_flags_as_flags(group.typer_instance)
