"""``retrieval index``: the group alone, whose sub-commands (``INDEX_COMMANDS``: index_commands,
maintenance_commands, shard_commands) load when one is named, so ``retrieval index --help`` imports no faiss."""

from __future__ import annotations

import typer

from retrieval.cli.command_registry import LazyIndexGroup


def register(app: typer.Typer) -> None:
    """Add the ``index`` group to the top-level app."""
    group = typer.Typer(
        help="Build, inspect and update an index directory (float + binary faiss).",
        no_args_is_help=True,
        cls=LazyIndexGroup,
    )
    app.add_typer(group, name="index")
