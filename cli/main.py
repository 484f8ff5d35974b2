"""The ``retrieval`` command: one typer app; each stage registers its own commands when named (``command_registry``)."""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Annotated

from retrieval.cli.thread_env import apply_thread_env_defaults

apply_thread_env_defaults()  # before numpy and faiss load: idle BLAS/OpenMP threads sleep instead of spinning

import typer  # noqa: E402

from retrieval.cli.command_registry import LazyCommandGroup  # noqa: E402
from retrieval.cli.help_display import present  # noqa: E402
from retrieval.indexing.common.errors import RetrievalError  # noqa: E402

INTERRUPTED = 130  # the shell's code for a command ended by SIGINT (128 + 2)

app = typer.Typer(
    name="retrieval",
    help="Train an image embedder with deep-metric-learning losses, export it to ONNX, "
    "index a gallery (float + binary faiss), evaluate retrieval quality and serve searches over HTTP.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=LazyCommandGroup,  # each command's module loads when the command is named (command_registry)
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"retrieval {package_version()}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Options of the ``retrieval`` command itself (each sub-command has its own)."""


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's ``version``)."""
    try:
        return metadata.version("retrieval")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


present(app)


def main() -> None:
    """Console-script entry point: user errors print one sentence and exit 2, never a traceback."""
    try:
        code = app(standalone_mode=False)
    except RetrievalError as error:
        typer.secho(f"error: {error}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.secho("aborted", err=True)
        sys.exit(130)
    except typer.TyperException as error:  # usage errors (bad option values) with standalone_mode=False
        error.show()  # type: ignore[attr-defined]  # click's UsageError/BadParameter carry show()
        sys.exit(error.exit_code)
    # Without standalone mode, typer RETURNS the exit code of typer.Exit and of Ctrl-C (130)
    # instead of exiting: pass it on, or an interrupted command would report success.
    if isinstance(code, int) and code != 0:
        if code == INTERRUPTED:
            typer.secho("interrupted", err=True)
        sys.exit(code)


if __name__ == "__main__":
    main()
