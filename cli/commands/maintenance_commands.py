"""``retrieval index snapshot|verify|rebuild|switch|rollback``: backups, checks and model upgrades of an
index directory (docs/operations.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.options.index_options import BatchOpt, IndexArg, ModelOpt, QuietOpt, ThreadsOpt
from retrieval.indexing import usecases as api

NoSwitchOpt = Annotated[
    bool, typer.Option("--no-switch", help="stop before the switch; `retrieval index switch` makes it live")
]
KeepOpt = Annotated[
    int,
    typer.Option(
        "--keep-previous",
        min=1,
        help="previous generations kept after the switch (each a way back with `index rollback`)",
    ),
]
RELOAD_HINT = "the service picks it up on its next reload: POST /admin/reload (or kill -HUP)"


def snapshot(index_dir: IndexArg, out: Annotated[Path, typer.Argument(help="new directory for the copy")]) -> None:
    """Copy the index consistently, also while the service writes it (hard links where the file system allows).

    Restore by copying the snapshot back in place of the index; `retrieval index verify` checks either.
    """
    report = api.snapshot_index(index_dir, out)
    typer.echo(
        f"snapshot of {index_dir} (generation {report.generation}, {report.count} items) in {report.out}: "
        f"{report.files} files ({report.linked} hard-linked, {report.copied} copied, "
        f"{report.total_bytes / 1e6:.1f} MB) in {report.seconds:.1f} s"
    )
    typer.echo(f"next: retrieval index verify {report.out}")


def verify(
    index_dir: IndexArg,
    deep: Annotated[
        bool, typer.Option("--deep", help="also embed a sample of stored images again and compare their vectors")
    ] = False,
    sample: Annotated[int, typer.Option("--sample", min=1, help="stored images --deep embeds again")] = api.DEEP_SAMPLE,
) -> None:
    """Check every file, id, vector and record of the index, and that its model copy fits its graph and is
    the one it was built with; exits non-zero with the first problem."""
    report = api.verify_index(index_dir, deep=deep, sample=sample)
    for note in report.notes:
        typer.echo(f"note: {note}", err=True)
    if report.missing_count:
        shown = "; ".join(report.missing_images)
        typer.secho(
            f"{report.missing_count} gallery image(s) outside the index are missing ({shown}); their items are "
            "searchable but have no thumbnail",
            fg=typer.colors.YELLOW,
            err=True,
        )
    typer.echo(
        f"{index_dir} is consistent (generation {report.generation}): {report.items} items, {report.vectors} "
        f"vectors, {report.uploads} stored images"
        + (f", {report.vector_items} items added by vector (no image)" if report.vector_items else "")
        + f", {report.hashed_files} files checked against their sha256"
    )


def rebuild(
    index_dir: IndexArg,
    model: ModelOpt,
    batch_size: BatchOpt = 32,
    threads: ThreadsOpt = None,
    no_switch: NoSwitchOpt = False,
    keep_previous: KeepOpt = api.KEEP_PREVIOUS,
    quiet: QuietOpt = False,
) -> None:
    """Re-embed every stored image with a new model beside the live index, then switch to it atomically.

    Searches keep answering from the live index throughout; writes that arrive meanwhile are applied to the
    new generation before the switch. Killed, it goes on where it stopped when run again with the same
    model. The replaced generation is kept for `retrieval index rollback`. With the live model it does
    nothing (and keeps the previous generations).
    """

    def progress(done: int, total: int) -> None:
        typer.echo(f"re-embedded {done} of {total} items", err=True)

    report = api.rebuild_index(
        index_dir,
        model,
        batch_size=batch_size,
        threads=threads,
        switch=not no_switch,
        progress=None if quiet else progress,
        keep=keep_previous,
    )
    if report.unchanged:
        typer.echo(report.unchanged)
        return
    if not report.switched:
        typer.echo(
            f"the next generation of {index_dir} (model {report.model_sha256[:12]}) is ready, {report.embedded} "
            f"items embedded in {report.seconds:.1f} s; make it live with `retrieval index switch {index_dir}`"
        )
        return
    _echo_switch(report, "switched")


def switch(
    index_dir: IndexArg,
    batch_size: BatchOpt = 32,
    threads: ThreadsOpt = None,
    keep_previous: KeepOpt = api.KEEP_PREVIOUS,
) -> None:
    """Make the next generation (from `index rebuild --no-switch`, or a rolled-back one) live, atomically."""
    _echo_switch(api.switch_index(index_dir, batch_size=batch_size, threads=threads, keep=keep_previous), "switched")


def rollback(index_dir: IndexArg, batch_size: BatchOpt = 32, threads: ThreadsOpt = None) -> None:
    """Make the generation the last switch replaced live again (with what was added since), atomically."""
    _echo_switch(api.rollback_index(index_dir, batch_size=batch_size, threads=threads), "rolled back")


def _echo_switch(report: api.UpgradeReport, done: str) -> None:
    if report.unchanged:
        typer.echo(report.unchanged)
        return
    typer.echo(
        f"{done} {report.index_dir} to model {report.model_sha256[:12]}: {report.count} items "
        f"({report.embedded} embedded, {report.removed} removed while catching up) in {report.seconds:.1f} s"
    )
    typer.echo(RELOAD_HINT)


def register(app: typer.Typer) -> None:
    """Add ``snapshot``, ``verify``, ``rebuild``, ``switch`` and ``rollback`` to the ``index`` group."""
    for command in (snapshot, verify, rebuild, switch, rollback):
        app.command(command.__name__)(command)
