"""How the command line presents itself: help wrapped to the terminal, flags shown as flags, and a
"did you mean" for a misspelt option or command.

Help is click's plain layout, wrapped to the terminal's width whatever it is (no 80-column cap, no box
whose columns cut long words in a narrow terminal). Recent typer releases print every option's type
next to it, ``<bool>`` included, so an on/off flag such as ``--overwrite`` would read as if it took a
value (``--overwrite true``), which it does not: an empty metavar leaves a flag's type blank.
``present(app)`` applies all of it to every command and group of an app (``--help`` and ``--version``
included), so no declaration needs to.
"""

from __future__ import annotations

import difflib
import shutil
import textwrap
from collections.abc import Sequence
from typing import Any

import typer
from typer import _click as click  # typer's own copy of click: its parser, context and help formatter
from typer._click import formatting
from typer._click.exceptions import NoSuchOption, UsageError
from typer.core import TyperCommand, TyperGroup

UNLIMITED_WIDTH = 10_000
MIN_WIDTH = 40


def _wrap(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` (a longer word stays whole on its own line): no word is cut, no option
    name split at its hyphens."""
    return textwrap.wrap(" ".join(text.split()), max(width, 1), break_long_words=False, break_on_hyphens=False)


class WrappingFormatter(formatting.HelpFormatter):
    """click's help layout at the terminal's own width, wrapping words without ever cutting one; in a narrow
    terminal the option names get their own line and the help the whole width below them."""

    def __init__(self, indent_increment: int = 2, width: int | None = None, max_width: int | None = None) -> None:
        if width is None:
            width = formatting.FORCED_WIDTH or max(shutil.get_terminal_size().columns - 1, MIN_WIDTH)
        super().__init__(indent_increment, width, UNLIMITED_WIDTH)

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        for number, paragraph in enumerate(textwrap.dedent(text).split("\n\n")):
            if number:
                self.write("\n")
            if paragraph.startswith("\b"):  # click's mark for a block to keep as written
                self.write("".join(f"{indent}{line}\n" for line in paragraph[1:].strip("\n").splitlines()))
                continue
            self.write("".join(f"{indent}{line}\n" for line in _wrap(paragraph, self.width - len(indent))))

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        col_max = min(col_max, max(8, (self.width - self.current_indent) // 4))
        first_col = min(max((len(term) for term, _ in rows), default=0), col_max) + col_spacing
        text_width = self.width - self.current_indent - first_col
        for term, text in rows:
            self.write(f"{'':>{self.current_indent}}{term}")
            lines = _wrap(text, text_width) if text else []
            if not lines:
                self.write("\n")
                continue
            if len(term) <= first_col - col_spacing:
                self.write(" " * (first_col - len(term)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            self.write(lines[0] + "\n")
            self.write("".join(f"{'':>{first_col + self.current_indent}}{line}\n" for line in lines[1:]))


class WrappingContext(click.Context):
    formatter_class = WrappingFormatter


def _blank_flag_types(params: list[Any]) -> list[Any]:
    for param in params:
        if getattr(param, "is_bool_flag", False) and param.metavar is None:
            param.metavar = ""  # typer shows the metavar, when set, instead of the type
    return params


def did_you_mean(name: str, known: list[str]) -> str:
    """``; did you mean --epochs?`` for the known names close to ``name``, or nothing."""
    close = difflib.get_close_matches(name, known, n=3)
    return f"; did you mean {' or '.join(close)}?" if close else ""


class FlagCommand(TyperCommand):
    """A typer command whose flags show no type in ``--help`` and whose unknown options get suggestions."""

    context_class = WrappingContext

    def get_params(self, ctx: Any) -> list[Any]:
        return _blank_flag_types(super().get_params(ctx))

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as error:
            known = [opt for param in self.get_params(ctx) for opt in [*param.opts, *param.secondary_opts]]
            name = error.option_name
            raise UsageError(f"No such option: {name}{did_you_mean(name, known)}", ctx) from None


class FlagGroup(TyperGroup):
    """A typer group (``retrieval``, ``retrieval index``): flags without types, suggestions for commands."""

    context_class = WrappingContext

    def get_params(self, ctx: Any) -> list[Any]:
        return _blank_flag_types(super().get_params(ctx))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command's whole first sentence, wrapped like the rest (click cuts it to the width with ...)."""
        rows = [
            (name, command.get_short_help_str(UNLIMITED_WIDTH))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        name = args[0] if args else ""
        if args and self.get_command(ctx, name) is None and not name.startswith("-"):
            hint = did_you_mean(name, self.list_commands(ctx))
            raise UsageError(f"No such command {name!r}{hint}", ctx)
        return super().resolve_command(ctx, args)


def present(app: typer.Typer) -> None:
    """Give ``app``, its commands and its sub-apps plain help wrapped to the terminal and the classes above
    (where typer's own were left)."""
    app.rich_markup_mode = None  # click's own help layout, with WrappingFormatter's wrapping
    if app.info.cls in (None, TyperGroup) or not isinstance(app.info.cls, type):  # or typer's "unset" placeholder
        app.info.cls = FlagGroup
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):  # typer fills in its own class when none is chosen
            command.cls = FlagCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            present(group.typer_instance)
