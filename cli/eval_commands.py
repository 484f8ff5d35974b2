"""CLI commands of this stage (being written)."""

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
