"""``retrieval index build|info|add|remove|compact``: the index directory from the shell (``search``: search_commands;
``snapshot``, ``verify``, ``rebuild``, ``switch``, ``rollback``: maintenance_commands; ``merge``: shard_commands;
the ``index`` group itself, which loads each of them when named: index_group)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.commands.shard_commands import echo_shard_report
from retrieval.cli.options.backend_options import BackendOpt, CollectionOpt, MilvusUriOpt
from retrieval.cli.options.build_options import (
    BinaryKindOpt,
    BuildDataOpt,
    BuildModelOpt,
    BuildOutOpt,
    BuildSplitOpt,
    FloatKindOpt,
    ItemsOpt,
    VectorsOpt,
)
from retrieval.cli.options.index_options import (
    BatchOpt,
    DataOpt,
    DbaOpt,
    IndexArg,
    KeysOpt,
    PixelCheckOpt,
    QuietOpt,
    ServedParamsOpt,
    ShardOpt,
    ThreadsOpt,
    ThresholdOpt,
)
from retrieval.indexing import usecases as api
from retrieval.indexing.audit.audit_report import LABEL_ISSUES, OUTLIERS
from retrieval.indexing.audit.auditing import audit_index
from retrieval.indexing.exported_model.model_manifest import ModelManifest

MAX_LISTED_FAILURES = 10


def echo_failures(failures: Sequence[tuple[Path, str]]) -> None:
    """Report skipped images on stderr: the first few with their reasons, then a count."""
    if not failures:
        return
    typer.secho(f"skipped {len(failures)} unreadable image(s):", fg=typer.colors.YELLOW, err=True)
    for _, reason in failures[:MAX_LISTED_FAILURES]:
        typer.echo(f"  {reason}", err=True)
    if len(failures) > MAX_LISTED_FAILURES:
        typer.echo(f"  ... and {len(failures) - MAX_LISTED_FAILURES} more", err=True)


def build(
    out: BuildOutOpt,
    model: BuildModelOpt = None,
    data: BuildDataOpt = None,
    vectors: VectorsOpt = None,
    items: ItemsOpt = None,
    float_kind: FloatKindOpt = "flat",
    binary_kind: BinaryKindOpt = "flat",
    batch_size: BatchOpt = 32,
    split: BuildSplitOpt = "all",
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    backend: BackendOpt = "files",
    milvus_uri: MilvusUriOpt = None,
    collection: CollectionOpt = None,
    shard: ShardOpt = None,
    dba: DbaOpt = None,
    postprocess_params: ServedParamsOpt = None,
) -> None:
    """Embed a dataset with an exported model (or take --vectors) and write a float + binary index directory."""
    request = api.BuildRequest(
        model=model,
        data=data,
        out=out,
        vectors=vectors,
        items=items,
        split=split,
        float_kind=float_kind,
        binary_kind=binary_kind,
        batch_size=batch_size,
        threads=threads,
        progress=not quiet,
        target=api.index_target(backend, milvus_uri, collection, out),  # an unknown backend or a stray option first
        shard=shard,
        dba=dba,
        postprocess_params=api.load_params(postprocess_params) if postprocess_params else None,
    )  # the rules between options: BuildRequest's
    echo_build(api.run_build(request), out, by_vector=vectors is not None)


def echo_build(report: api.BuildReport | api.ShardReport, out: Path, *, by_vector: bool) -> None:
    """What ``index build`` made (a shard, vectors or embedded images), its skipped images, and what to run next."""
    if isinstance(report, api.ShardReport):
        echo_shard_report(report, out)
        echo_failures(report.failures)
        return
    echo_failures(report.failures)
    if by_vector:
        typer.echo(
            f"indexed {report.count} vectors of {report.num_labels} classes into {report.index_dir} "
            f"({report.storage}, no model: it searches by vector) in {report.total_seconds:.1f} s"
        )
        typer.echo(f"next: retrieval search {out} --vector Q.npy   (or: retrieval serve --index {out})")
        return
    typer.echo(
        f"indexed {report.count} images of {report.num_labels} classes into {report.index_dir} "
        f"({report.storage}, model {report.model_sha256[:12]}) "
        f"in {report.total_seconds:.1f} s"
    )
    typer.echo(
        f"next: retrieval eval --index {out}   (or: retrieval search {out} IMAGE..., retrieval serve --index {out})"
    )


def info(index_dir: IndexArg) -> None:
    """Show what an index holds and how it was built."""
    manifest = api.index_info(index_dir)
    sizes = {p.name: p.stat().st_size for p in Path(index_dir).iterdir() if p.is_file()}
    rows = [
        ("items", f"{manifest.count} ({manifest.num_labels} classes)"),
        (
            "embedding",
            f"{manifest.dim}-d float, {manifest.bits}-bit binary (threshold {manifest.binarization_threshold})",
        ),
        ("backend", api.backend_of(manifest).summary(manifest)),
        ("kinds", f"float {manifest.float_kind}, binary {manifest.binary_kind}"),
        (
            "segments",
            f"{manifest.delta_segments + 1} (base + {manifest.delta_segments} deltas), {manifest.tombstones} tombstones",
        ),
        ("compaction", _policy_text(manifest.compaction)),
        ("postprocess", _postprocess_text(manifest.postprocess)),
        (
            "model",
            f"{manifest.model_sha256[:12]} {manifest.model.backbone} / {manifest.model.loss} ({manifest.model_dir})",
        ),
        *_verdict_rows(manifest.model.verdict),
        (
            "calibration",
            manifest.model.calibration.sentence
            if manifest.model.calibration
            else api.no_calibration_reason(manifest.model),
        ),
        ("text", _text_side_text(manifest.model)),
        ("created", manifest.created_at),
        ("updated", f"{manifest.updated_at} (generation {manifest.generation})"),
        ("faiss", manifest.faiss_version),
        ("files", ", ".join(f"{name} {size / 1e6:.2f} MB" for name, size in sorted(sizes.items()))),
        *[("generation", _generation_text(generation)) for generation in api.index_generations(index_dir)],
    ]
    if (edited := api.manifest_edit_problem(index_dir)) is not None:  # its figures above may be wrong
        rows.insert(0, ("WARNING", f"{edited}; `retrieval index verify {index_dir}` checks the rest"))
    for key, value in rows:
        typer.echo(f"{key:<10} {value}")


def _text_side_text(model: ModelManifest) -> str:
    """Whether the index's model searches by words (its text tower), or why not."""
    if model.text is not None:
        return f"searchable by words (--text): {model.text.source}, {model.text.context_length} tokens"
    return f"none: {model.text_dropped}" if model.text_dropped else "none (the model has no text tower)"


def add(
    index_dir: IndexArg,
    data: DataOpt,
    batch_size: BatchOpt = 32,
    threads: ThreadsOpt = None,
    metadata: Annotated[
        str | None,
        typer.Option(
            "--metadata",
            help='JSON object stored with every added image, e.g. \'{"shop": "berlin"}\' (over a CSV\'s own '
            "columns); search filters match it",
        ),
    ] = None,
    quiet: QuietOpt = False,
    dba: DbaOpt = None,
    keys: KeysOpt = None,
    replace_keyed: Annotated[
        bool,
        typer.Option("--replace", help="an image whose key an item already carries replaces that item (upsert)"),
    ] = False,
) -> None:
    """Embed more images with the index's own model and add them (new ids, old ids unchanged); a DBA index
    augments them as its build did. A key already in the index is refused unless --replace."""
    extra = api.parse_metadata(metadata, "--metadata") if metadata is not None else {}
    report = api.add_images(
        index_dir,
        data,
        metadata=extra,
        batch_size=batch_size,
        threads=threads,
        progress=not quiet,
        dba=dba,
        keys=keys,
        replace_keyed=replace_keyed,
    )
    echo_failures(report.failures)
    replaced = f", replacing {report.replaced} keyed item(s)" if report.replaced else ""
    typer.echo(
        f"added {len(report.ids)} images (ids {min(report.ids, default=0)}..{max(report.ids, default=0)}){replaced}; "
        f"the index now holds {report.count}"
    )
    if report.dba is not None:
        typer.echo(
            f"the new images were augmented with their top {report.dba} neighbours (DBA); the old images that now "
            f"have new neighbours are not re-augmented until `retrieval index compact {index_dir}`"
        )


def remove(
    index_dir: IndexArg,
    ids: Annotated[list[int] | None, typer.Argument(help="item ids to remove")] = None,
    keys: Annotated[
        list[str] | None, typer.Option("--key", help="remove the item carrying this key (repeat for several)")
    ] = None,
) -> None:
    """Remove items by id (ids are never reused) or by key; an unknown id or key removes nothing and fails."""
    removed, count = api.remove_items(index_dir, ids or [], keys=keys or [])
    typer.echo(f"removed {removed} item(s); the index now holds {count}")


def _postprocess_text(postprocess: api.IndexPostprocess) -> str:
    dba = postprocess.dba
    qe, kr = postprocess.qe, postprocess.kreciprocal
    return (
        (f"vectors augmented (DBA n={dba.n}, alpha={dba.alpha:g}); " if dba else "raw vectors (no DBA); ")
        + f"postprocess=qe: n={qe.n}, alpha={qe.alpha:g}; "
        + f"kreciprocal: k1={kr.k1}, k2={kr.k2}, lambda={kr.lam:g}, top {kr.candidates}"
    )


def _generation_text(generation: api.Generation) -> str:
    if generation.problem:
        return f"{generation.role}: {generation.problem}"
    return (
        f"{generation.role}: model {generation.model_sha256[:12]}, {generation.count} items, updated "
        f"{generation.updated_at} ({generation.path.name})"
    )


def _verdict_rows(verdict: api.TrainingVerdict | None) -> list[tuple[str, str]]:
    """The model's training verdict: its sentence, then its decision and intervals."""
    return [("training", verdict.sentence), ("verdict", verdict.figures())] if verdict is not None else []


def _policy_text(policy: api.CompactionPolicy) -> str:
    return (
        f"automatic: deltas merged past {policy.max_delta_segments}; a new base when delta rows exceed "
        f"{policy.max_delta_fraction:g} x the base or tombstones {policy.max_tombstone_fraction:g} x all rows "
        f"(at least {policy.min_rows})"
    )


def compact(
    index_dir: IndexArg,
    max_delta_segments: Annotated[
        int | None, typer.Option("--max-delta-segments", min=1, help="merge the smallest deltas past this many")
    ] = None,
    max_delta_fraction: Annotated[
        float | None,
        typer.Option("--max-delta-fraction", min=0.0, help="a new base when delta rows exceed this x base rows"),
    ] = None,
    max_tombstone_fraction: Annotated[
        float | None,
        typer.Option("--max-tombstone-fraction", min=0.0, help="a new base when tombstones exceed this x all rows"),
    ] = None,
    min_rows: Annotated[
        int | None,
        typer.Option("--min-rows", min=0, help="automatic new bases wait for this many delta rows/tombstones"),
    ] = None,
) -> None:
    """Merge the base, every delta segment and no removed item into one new base, atomically.

    Adds write delta segments and removes leave tombstones; searches merge the segments.
    Compacting rewrites the index as one base of its float and binary kinds (IVF/PQ retrained).

    A DBA index (`index build --dba N`) is re-augmented from its raw vectors: every item with its
    current top N neighbours, including the items added since the build.

    Updates also compact on their own past the thresholds `retrieval index info` shows.
    The options change those thresholds (kept in manifest.json).
    """
    changes = {
        "max_delta_segments": max_delta_segments,
        "max_delta_fraction": max_delta_fraction,
        "max_tombstone_fraction": max_tombstone_fraction,
        "min_rows": min_rows,
    }
    report = api.compact_index(index_dir, changes)
    result = report.result
    typer.echo(
        f"{result.segments_before} segments and {result.tombstones_before} tombstones -> "
        f"{result.segments_after} segment, {result.tombstones_after} tombstones; {report.count} items "
        f"in {result.seconds:.1f} s"
    )
    typer.echo(f"compaction {_policy_text(report.policy)}")


def index_duplicates(
    index_dir: Annotated[Path, typer.Argument(help="Index directory.")],
    out: Annotated[Path, typer.Option("--out", help="CSV to write: group, size, id, key, path, label.")],
    threshold: ThresholdOpt = None,
    pixel_check: PixelCheckOpt = True,
    quiet: QuietOpt = False,
) -> None:
    """Find the groups of near-duplicate items of an index (connected components of the pairs above the copy
    threshold whose images' pixels agree), largest first, and write them as CSV, one row per item."""
    found = api.find_index_duplicates(index_dir, out, threshold=threshold, verify=pixel_check, progress=not quiet)
    typer.echo(f"threshold: {found.thresholds.source}")
    typer.echo(f"{found.summary()}; wrote {out}")


def index_audit(
    index_dir: Annotated[Path, typer.Argument(help="Index directory.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for label_issues.csv, outliers.csv, audit.json ...")],
    exclude_list: Annotated[
        Path | None, typer.Option("--exclude-list", help="Write the probable mislabels, one a line, to this file.")
    ] = None,
) -> None:
    """Rank the items of an index by how likely their label is wrong (from their stored embeddings, out of fold),
    as `retrieval data audit` does for a dataset; the same rows as GET /audit."""
    report = audit_index(index_dir, out, exclude_list=exclude_list)
    typer.echo(report.summary())
    typer.echo(f"wrote {out / LABEL_ISSUES} and {out / OUTLIERS}")


def register(app: typer.Typer) -> None:
    """Add ``build``, ``info``, ``add``, ``remove``, ``compact``, ``duplicates`` and ``audit`` to the ``index``
    group (``index_group``)."""
    for command in (build, info, add, remove, compact):
        app.command(command.__name__)(command)
    app.command("duplicates")(index_duplicates)
    app.command("audit")(index_audit)
