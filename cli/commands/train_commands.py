"""``retrieval train`` and ``retrieval losses``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from retrieval.cli.activity import activity, show_run_log
from retrieval.cli.options.config_options import config_layer, show_config_defaults
from retrieval.cli.options.train_options import (
    AllowDownload,
    Backbone,
    BatchSize,
    ConfigFileOpt,
    Data,
    Device,
    EmbeddingDim,
    EnsembleOpt,
    Epochs,
    Exclude,
    FinalFit,
    ImageSize,
    ImagesPerClass,
    Loss,
    Lr,
    MaxImagesPerClass,
    MaxStepsPerEpoch,
    MetaClasses,
    OnBadImage,
    Pretrained,
    PrintConfigOpt,
    RecipeOpt,
    ResumeOpt,
    Seed,
    Split,
    Tensorboard,
    TrainOutOpt,
    TrainOverwriteOpt,
    TrainQuietOpt,
    TrainSetOpt,
    ValFold,
    ValFraction,
    WeightsCache,
    Workers,
    consent_command,
)
from retrieval.indexing.audit.audit_records import audit_note
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.probability.held_out import summary_lines
from retrieval.training.config.config_checks import check_config, check_run_dir, recipe_loss_warning
from retrieval.training.config.train_config import TrainConfig, build_config
from retrieval.training.config.train_request import TrainRequest

if TYPE_CHECKING:  # torch loads only when a command needs it
    from retrieval.training.usecases import TrainedRun


def train(
    out: TrainOutOpt = None,
    data: Data = None,
    config: ConfigFileOpt = None,
    recipe: RecipeOpt = None,
    loss: Loss = None,
    backbone: Backbone = None,
    embedding_dim: EmbeddingDim = None,
    image_size: ImageSize = None,
    epochs: Epochs = None,
    batch_size: BatchSize = None,
    max_images_per_class: MaxImagesPerClass = None,
    exclude: Exclude = None,
    images_per_class: ImagesPerClass = None,
    lr: Lr = None,
    device: Device = None,
    pretrained: Pretrained = None,
    allow_download: AllowDownload = None,
    weights_cache: WeightsCache = None,
    split: Split = None,
    final_fit: FinalFit = None,
    val_fraction: ValFraction = None,
    val_fold: ValFold = None,
    workers: Workers = None,
    on_bad_image: OnBadImage = None,
    seed: Seed = None,
    ensemble: EnsembleOpt = None,
    meta_classes: MetaClasses = None,
    max_steps_per_epoch: MaxStepsPerEpoch = None,
    tensorboard: Tensorboard = None,
    set_: TrainSetOpt = None,
    print_config: PrintConfigOpt = False,
    overwrite: TrainOverwriteOpt = False,
    resume: ResumeOpt = False,
    quiet: TrainQuietOpt = False,
) -> None:
    """Fit an embedder: class-disjoint split, validation MAP@R picks the best epoch, test metrics at the end.

    The configuration is built in layers: the defaults shown below, then --recipe, then --config, then these
    options, then --set (--print-config shows the result). A default that a recipe changes says so, e.g.
    "10; --recipe zhai_wu: 31". --epochs 0 trains nothing: the run's model is the starting backbone, to try
    it before training. --split none or --final-fit train on every class (docs/training.md).
    """
    show_run_log()
    if out is None and not print_config:
        raise ConfigError("--out is required: the run directory to train into (e.g. --out runs/first)")
    request = TrainRequest(
        options=config_layer(train, locals()),
        recipe=recipe,
        config_file=config,
        assignments=tuple(set_ or []),
        resume_from=out if resume else None,
        out=out,
        overwrite=overwrite,
        members=ensemble,
    )
    _check_before_torch(request, recipe, loss, print_config=print_config, resume=resume)
    _run(request, recipe, print_config=print_config, quiet=quiet)


def _run(request: TrainRequest, recipe: str | None, *, print_config: bool, quiet: bool) -> None:
    """Load torch, then print the resolved config (``--print-config``) or train and print the summary; an
    interrupted run says how to continue it."""
    with activity("loading torch and the training code", enabled=not (quiet or print_config)):
        from retrieval.training.config.config_resolver import resolve_config
        from retrieval.training.config.recipes import describe_recipe
        from retrieval.training.usecases import (
            DistContext,
            TrainedRun,
            interrupt_at_safe_points,
            interrupted_note,
            run_train,
        )

    if print_config:
        _print_config(resolve_config(request))
        return
    out = request.out
    assert out is not None  # checked by train
    ctx = DistContext.from_environment()  # torchrun sets RANK / WORLD_SIZE; a plain run is rank 0 of 1
    if recipe and ctx.is_main:
        logging.getLogger(__name__).info("recipe %s: %s", recipe, describe_recipe(recipe))
    try:
        with interrupt_at_safe_points() as interrupt:
            result = run_train(request, progress=not quiet, ctx=ctx, stop_check=interrupt.check)
    except KeyboardInterrupt:
        if ctx.is_main:
            typer.secho(interrupted_note(out), err=True)
        raise
    if isinstance(result, TrainedRun):
        if ctx.is_main:
            _print_summary(result)
            if note := audit_note(resolve_config(request).data.path):
                typer.echo(note)
    elif result is not None:
        _print_ensemble_summary(result.run_dir, result.metrics)


def _check_before_torch(
    request: TrainRequest, recipe: str | None, loss: str | None, *, print_config: bool, resume: bool
) -> None:
    """What can be refused without torch, refused in a second: config keys and values (every layer but the
    recipe's, whose keys are the tables'), the dataset path and layout, the image size; then the warnings; then
    the run directory (an existing run answers at once)."""
    layers = request.layers()
    warnings = check_config(build_config(layers), needs_data=not print_config, recipe=recipe, consent=consent_command())
    warnings += [warning] if (warning := recipe_loss_warning(recipe, loss)) else []
    for text in warnings:
        typer.secho(f"warning: {text}", fg=typer.colors.YELLOW, err=True)
    if request.out is not None and not print_config:
        check_run_dir(request.out, resume=resume, overwrite=request.overwrite)


def _print_config(cfg: TrainConfig) -> None:
    """``--print-config``: the YAML a run would save as config.yaml (and --config reads back)."""
    from retrieval.training.config.train_config import config_yaml
    from retrieval.training.losses import get_loss_spec

    get_loss_spec(cfg.loss.name)  # a misspelt loss is an error here too, not a printed config
    typer.echo(config_yaml(cfg), nl=False)


def _print_summary(result: TrainedRun) -> None:
    typer.echo(f"run directory: {result.run_dir}  (best epoch {result.best_epoch} of {result.epochs_completed})")
    test = result.test
    if test is not None:
        for kind, metrics in (("float", test.float_metrics), ("binary", test.binary_metrics)):
            recall = ", ".join(f"R@{k} {v:.4f}" for k, v in metrics.recall_at_k.items())
            typer.echo(f"test {kind:6s}: MAP@R {metrics.map_at_r:.4f}  P@1 {metrics.precision_at_1:.4f}  {recall}")
        for reference, what in ((test.reference, "pooled features"), (test.whitened_reference, "whitening stage")):
            if reference is not None:  # the starting backbone's pooled features (+ whitening), same classes
                typer.echo(
                    f"{reference.name} ({what}): float MAP@R {reference.float_metrics.map_at_r:.4f}  "
                    f"P@1 {reference.float_metrics.precision_at_1:.4f}  "
                    f"binary MAP@R {reference.binary_metrics.map_at_r:.4f}"
                )
    if result.verdict is not None:
        typer.echo(f"verdict: {result.verdict.sentence}")
    for line in summary_lines(result.calibration if result.test is not None else {"available": False}):
        typer.echo(line)
    typer.echo(f"next: retrieval export {result.run_dir}")


def _print_ensemble_summary(run_dir: Path, metrics: dict[str, Any]) -> None:
    members, dim = metrics["members"], metrics["member_embedding_dim"]
    grouping = f", each on its own grouping into {metrics['meta_classes']} meta-classes (DREML)"
    typer.echo(f"ensemble of {members} members in {run_dir}{grouping if metrics['meta_classes'] else ''}")
    typer.echo(
        f"embedding dim {members} x {dim} = {metrics['embedding_dim']} "
        f"(the binary index has {metrics['embedding_dim']} bits)"
    )
    rows = [(f"member {i}", member["test"]) for i, member in enumerate(metrics["member_metrics"])]
    rows.append(("ensemble", metrics["test"]))
    for name, test in rows:
        float_, binary = test["float"], test["binary"]
        typer.echo(
            f"test {name:9s}: float MAP@R {float_['map_at_r']:.4f}  P@1 {float_['precision_at_1']:.4f}  "
            f"binary MAP@R {binary['map_at_r']:.4f}"
        )
    typer.echo(f"next: retrieval export {run_dir}")


def losses(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """List the registered losses with a one-line description each, and the recipes with what they set."""
    from retrieval.training.config.recipes import BASE_SETTINGS, recipe_registry, recipe_settings
    from retrieval.training.losses import available_losses, available_miners

    specs = available_losses()
    recipes = {name: recipe_settings(name) for name in recipe_registry().names()}
    if as_json:
        rows = [
            {
                "name": s.name,
                "family": s.family,
                "sampler": s.sampler,
                "default_miner": s.default_miner,
                "description": s.description,
            }
            for s in specs
        ]
        document = {"losses": rows, "miners": available_miners(), "recipe_base": BASE_SETTINGS, "recipes": recipes}
        typer.echo(json.dumps(document, indent=2))
        return
    width = max(len(s.name) for s in specs)
    typer.echo(f"{'loss':<{width}}  {'family':6s}  {'sampler':8s}  {'default miner':18s}  description")
    for spec in specs:
        miner = spec.default_miner or "-"
        typer.echo(f"{spec.name:<{width}}  {spec.family:6s}  {spec.sampler:8s}  {miner:18s}  {spec.description}")
    typer.echo(f"\nminers: {', '.join(available_miners())}   (docs/losses.md has parameters and papers)")
    typer.echo(
        "\nrecipes: --recipe NAME sets the shared base and the loss's own settings; --loss NAME alone sets only "
        "loss.name on the configuration's defaults\n"
        f"  every recipe: {_settings_text(BASE_SETTINGS)}"
    )
    width = max(map(len, recipes))
    for name, settings in recipes.items():
        typer.echo(f"  {name:<{width}}  {_settings_text(settings)}")


def _settings_text(settings: dict[str, Any]) -> str:
    return ", ".join(f"{key}={json.dumps(value)}" for key, value in settings.items())


def register(app: typer.Typer) -> None:
    show_config_defaults(train)
    app.command("train")(train)
    app.command("losses")(losses)
