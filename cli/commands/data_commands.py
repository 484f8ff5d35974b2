"""``retrieval data ...``: make a synthetic dataset, describe a dataset and its split, find bad images."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.options.index_options import PixelCheckOpt, QuietOpt, ThresholdOpt
from retrieval.indexing.audit.audit_report import LABEL_ISSUES, OUTLIERS, RELABEL, SUMMARY
from retrieval.indexing.audit.auditing import audit_dataset, audit_vectors
from retrieval.indexing.audit.relabel import apply_relabel
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.bad_images import scan_images
from retrieval.indexing.data.class_check import class_problems, mirror_sensitive_classes
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import describe_layout, load_records
from retrieval.indexing.data.splits import FEWER_ADVICE, MIN_VALIDATION_CLASSES, MIN_VALIDATION_QUERIES, split_records
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.duplicates.dataset_copies import CSV_NAME, GRID_NAME
from retrieval.indexing.duplicates.dataset_duplicates import SplitSettings, find_exact_copies

DatasetArg = Annotated[Path, typer.Argument(help="Dataset folder or CSV manifest.")]
CheckedSplitOpt = Annotated[
    float, typer.Option("--val-fraction", help="Share of training classes the split would validate on.")
]

data_app = typer.Typer(
    name="data",
    help="Datasets: generate a synthetic one, show a dataset's layout and class-disjoint split, check its images.",
    no_args_is_help=True,
)


@data_app.command("synth")
def synth(
    out: Annotated[
        Path, typer.Argument(help="Folder to create (ImageFolder layout: OUT/<class>/<nnnn>.png + SOURCE.md).")
    ],
    classes: Annotated[
        int, typer.Option("--classes", min=1, help="Number of classes (visual concepts), at most 600.")
    ] = 40,
    per_class: Annotated[int, typer.Option("--per-class", min=1, help="Images per class.")] = 30,
    size: Annotated[int, typer.Option("--size", min=16, help="Image side in pixels.")] = 64,
    seed: Annotated[int, typer.Option("--seed", help="Random seed; the same seed gives byte-identical files.")] = 0,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace OUT if it holds an earlier synthetic dataset.")
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Generate a synthetic retrieval dataset: each class is a shape x colour x texture concept.

    Within a class, rotation, scale, position, background, clutter and noise vary. Class folders are numbered in a seeded random concept order, so the default split (first half of the sorted classes trains, second half tests) mixes attributes in both halves.
    """
    summary = generate_synthetic_dataset(
        out, classes=classes, per_class=per_class, size=size, seed=seed, overwrite=overwrite, progress=not quiet
    )
    typer.echo(summary.line())


@data_app.command("info")
def info(
    path: DatasetArg,
    val_fraction: Annotated[
        float, typer.Option("--val-fraction", help="Share of training classes held out to validate.")
    ] = 0.2,
    val_fold: Annotated[
        int | None, typer.Option("--val-fold", help="Validate on this fold of the training classes.")
    ] = None,
    num_folds: Annotated[int, typer.Option("--num-folds", help="Number of class folds when --val-fold is given.")] = 4,
) -> None:
    """Show the detected layout and the class-disjoint train / val / test split of a dataset."""
    records = load_records(path)
    sizes = Counter(record.label for record in records).values()
    typer.echo(
        f"{path}: {describe_layout(path)}, {len(records)} images of {len(sizes)} classes "
        f"({min(sizes, default=0)}-{max(sizes, default=0)} per class)"
    )
    _show_split(records, val_fraction=val_fraction, val_fold=val_fold, num_folds=num_folds)


def _show_split(records: list[ImageRecord], *, val_fraction: float, val_fold: int | None, num_folds: int) -> None:
    """The classes and images each split would get, and a warning when validation is too small to choose on."""
    try:
        splits = split_records(records, val_fraction=val_fraction, val_fold=val_fold, num_folds=num_folds)
    except DataError as error:  # too small to train on is still worth describing
        typer.echo(f"  no class-disjoint split: {error}")
        return
    for name in ("train", "val", "test"):
        classes = getattr(splits, f"{name}_classes")
        shown = ", ".join(classes[:3]) + (", ..." if len(classes) > 3 else "")
        typer.echo(f"  {name:5s} {len(getattr(splits, name)):7d} images {len(classes):6d} classes  {shown}")
    val_classes, val_images = len(splits.val_classes), len(splits.val)
    if val_classes < MIN_VALIDATION_CLASSES or val_images < MIN_VALIDATION_QUERIES:
        typer.secho(
            f"warning: with --val-fraction {val_fraction}, {val_classes} validation classes ({val_images} images) "
            f"choose the epoch, fewer than the {MIN_VALIDATION_CLASSES} classes and {MIN_VALIDATION_QUERIES} queries "
            f"that tell a gain from noise; {FEWER_ADVICE}",
            fg=typer.colors.YELLOW,
            err=True,
        )


@data_app.command("check")
def check(
    path: DatasetArg,
    val_fraction: CheckedSplitOpt = 0.2,
    quiet: QuietOpt = False,
) -> None:
    """Read every image of a dataset and say what would stop or weaken training: unreadable or tiny images, empty
    or single-image classes, and the classes a split would leave."""
    records = load_records(path)
    for problem in class_problems(path, records, layout=describe_layout(path)):
        typer.secho(f"warning: {problem}", fg=typer.colors.YELLOW, err=True)
    typer.echo(f"{path}: {len(records)} images; the class-disjoint split (--val-fraction {val_fraction}):")
    _show_split(records, val_fraction=val_fraction, val_fold=None, num_folds=4)
    report = scan_images(records, progress=not quiet)
    typer.echo(report.summary(limit=20))
    if len(records) > 1:
        copies = find_exact_copies(records, split=SplitSettings(val_fraction=val_fraction), progress=not quiet)
        typer.echo(f"{copies.summary()}; near copies too: retrieval data duplicates {path} --out DIR")
        if copies.counts("exact").across_classes:
            typer.echo(
                f"copies across classes are label noise: see which images are probably mislabelled with "
                f"retrieval data audit {path} --out DIR"
            )
    if mirrored := mirror_sensitive_classes(record.label for record in records):
        typer.echo(f"{MIRROR_ADVICE} (class names that suggest it: {', '.join(mirrored[:5])})")
    if not report.ok:
        raise DataError(f"{len(report.bad)} unreadable images in {path}; fix or remove them")


MIRROR_ADVICE = (
    "advice: training flips images left-right at random (data.horizontal_flip); when a class differs from another "
    "by its mirror image (arrows, text, left- vs right-hand parts), that teaches the model to confuse them: "
    "turn it off with `retrieval train --set data.horizontal_flip=false` (docs/data.md)"
)


@data_app.command("duplicates")
def data_duplicates(
    data: DatasetArg,
    out: Annotated[Path, typer.Option("--out", help="Folder for duplicates.csv and duplicates.png.")],
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="Export or run directory. [default: EfficientNet-Lite0's ImageNet weights, exported once to OUT/model]",
            show_default=False,
        ),
    ] = None,
    threshold: ThresholdOpt = None,
    pixel_check: PixelCheckOpt = True,
    exclude_list: Annotated[
        Path | None,
        typer.Option(
            "--exclude-list", help="Write the paths to leave out (all but one image of each group) to this file."
        ),
    ] = None,
    val_fraction: Annotated[
        float, typer.Option("--val-fraction", help="The split to check for leaks: as `retrieval train`'s.")
    ] = 0.2,
    val_fold: Annotated[int | None, typer.Option("--val-fold", help="As `retrieval train`'s.")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Find exact copies (the same decoded pixels) and near copies (embeddings above the copy threshold, pixels
    that agree).

    Counts them within a class, across classes (possible label noise) and across the class-disjoint split that
    `retrieval train` makes with the same --val-fraction (a leak that inflates test MAP@R). Writes
    OUT/duplicates.csv (path_a, path_b, score, kind, class_a, class_b, split_a, split_b) and OUT/duplicates.png
    (the pairs side by side, leaks first). `retrieval train --exclude FILE` leaves out what --exclude-list wrote.
    """
    from retrieval.training.usecases import data_duplicates as run  # torch: only this command needs it

    copies = run(
        data,
        out,
        model=model,
        threshold=threshold,
        verify=pixel_check,
        exclude_list=exclude_list,
        split=SplitSettings(val_fraction=val_fraction, val_fold=val_fold),
        progress=not quiet,
    )
    typer.echo(f"threshold: {copies.thresholds.source if copies.thresholds else '(exact copies only)'}")
    typer.echo(copies.summary())
    for path, reason in copies.unreadable[:10]:
        typer.secho(f"warning: skipped {path}: {reason}", fg=typer.colors.YELLOW, err=True)
    typer.echo(f"wrote {out / CSV_NAME}" + (f" and {out / GRID_NAME}" if copies.pairs else ""))
    if exclude_list is not None:
        typer.echo(
            f"wrote {len(copies.excluded())} paths to leave out to {exclude_list}; "
            f"next: retrieval train --data {data} --exclude {exclude_list} ..."
        )


@data_app.command("audit")
def data_audit(
    out: Annotated[Path, typer.Option("--out", help="Folder for the audit's files.")],
    data: Annotated[Path | None, typer.Argument(help="Dataset folder or CSV manifest (or give --vectors).")] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="Export or run directory. [default: EfficientNet-Lite0's ImageNet weights, exported once to OUT/model]",
            show_default=False,
        ),
    ] = None,
    vectors: Annotated[
        Path | None, typer.Option("--vectors", help="Audit these embeddings (.npy) instead of embedding images.")
    ] = None,
    items: Annotated[
        Path | None, typer.Option("--items", help="With --vectors: one row per vector with a label column.")
    ] = None,
    exclude_list: Annotated[
        Path | None,
        typer.Option(
            "--exclude-list", help="Write the probable mislabels, one a line, for `retrieval train --exclude`."
        ),
    ] = None,
    val_fraction: Annotated[
        float, typer.Option("--val-fraction", help="The split to check for leaks: as `retrieval train`'s.")
    ] = 0.2,
    quiet: QuietOpt = False,
) -> None:
    """Rank every image by how likely its label is wrong, and find the images that belong to no class.

    Scores come from the image's nearest neighbours and the class means in the model's embedding space, out of
    fold (an image never votes for itself nor for its copies). Writes OUT/label_issues.csv (path, label,
    suggested_label, score: every item, most suspect first), OUT/outliers.csv (path, label, score),
    OUT/relabel.csv (the suspects with a new_label to edit, for `retrieval data apply-relabel`), OUT/audit.json
    and OUT/audit.png (each top suspect beside its nearest images of the given and the suggested class).
    """
    if (data is None) == (vectors is None):
        raise DataError("give either a dataset (DATA) or --vectors EMB.npy --items ITEMS.csv")
    if vectors is not None:
        report = audit_vectors(vectors, items, out, exclude_list=exclude_list)
    elif model is not None:  # torch-free
        assert data is not None  # checked above
        report = audit_dataset(
            model, data, out, exclude_list=exclude_list, split=SplitSettings(val_fraction), progress=not quiet
        )
    else:
        from retrieval.training.usecases import data_audit as run  # torch: the default model is exported

        assert data is not None  # checked above
        report = run(data, out, exclude_list=exclude_list, split=SplitSettings(val_fraction), progress=not quiet)
    typer.echo(report.summary())
    typer.echo(f"wrote {out / LABEL_ISSUES}, {out / OUTLIERS}, {out / RELABEL} and {out / SUMMARY}")
    if exclude_list is not None:
        typer.echo(
            f"wrote {len(report.suspects())} {report.name_column}s to leave out to {exclude_list}"
            + (f"; next: retrieval train --data {data} --exclude {exclude_list} ..." if data is not None else "")
        )


@data_app.command("apply-relabel")
def apply_relabel_command(
    data: DatasetArg,
    relabel: Annotated[Path, typer.Option("--relabel", help="relabel.csv from `retrieval data audit`, edited.")],
    out: Annotated[Path, typer.Option("--out", help="New folder for the relabelled copy of DATA.")],
    quiet: QuietOpt = False,
) -> None:
    """Copy an ImageFolder dataset to OUT with each image of relabel.csv moved to its new_label's folder (an empty
    new_label keeps it). DATA itself is never changed."""
    counts = apply_relabel(data, relabel, out, progress=not quiet)
    typer.echo(f"copied {counts['copied']} images to {out}, {counts['moved']} of them under a new label")


def register(app: typer.Typer) -> None:
    """Add the ``data`` sub-app to the top-level app."""
    app.add_typer(data_app, name="data")
