"""``retrieval train`` and ``retrieval losses``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_type_hints

import typer

from retrieval.indexing.common.errors import ConfigError


@dataclass(frozen=True)
class ConfigKey:
    """Marks a ``train`` option as the command-line spelling of a config key (``section.key``)."""

    path: str


def _cli_layer(command: Callable[..., Any], values: dict[str, Any]) -> dict[str, Any]:
    """The config overrides of the options marked with ``ConfigKey``; options left unset override nothing."""
    layer: dict[str, Any] = {}
    for name, hint in get_type_hints(command, include_extras=True).items():
        keys = [meta for meta in get_args(hint)[1:] if isinstance(meta, ConfigKey)]
        if keys and values.get(name) is not None:
            section, key = keys[0].path.split(".")
            value = values[name]
            layer.setdefault(section, {})[key] = str(value) if isinstance(value, Path) else value
    return layer


def _parse_set(assignments: list[str]) -> dict[str, Any]:
    """``--set trainer.patience=3`` -> {"trainer": {"patience": 3}} (values parsed as YAML)."""
    import yaml

    layer: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE (e.g. trainer.patience=3), got '{assignment}'")
        *parents, leaf = key.split(".")
        node = layer
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(raw)
    return layer


def train(
    out: Annotated[Path, typer.Option("--out", help="Run directory (config, metrics.jsonl, checkpoints, curves.png).")],
    data: Annotated[
        Path | None,
        typer.Option("--data", help="ImageFolder dir, CSV manifest, or CUB/Cars196/SOP/In-Shop root."),
        ConfigKey("data.path"),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML config; CLI options override it.")] = None,
    recipe: Annotated[
        str | None,
        typer.Option(
            "--recipe",
            help="Start from a loss's paper defaults on a shared base, e.g. normsoftmax, triplet; "
            "zhai_wu: Zhai & Wu's own setup.",
        ),
    ] = None,
    loss: Annotated[
        str | None, typer.Option("--loss", help="Loss name (see `retrieval losses`)."), ConfigKey("loss.name")
    ] = None,
    backbone: Annotated[
        str | None,
        typer.Option(
            "--backbone", help="resnet18|resnet50|densenet121|efficientnet_lite0|... or timm:NAME for any timm model."
        ),
        ConfigKey("model.backbone"),
    ] = None,
    embedding_dim: Annotated[
        int | None,
        typer.Option("--embedding-dim", help="Embedding size (bits of the binary index)."),
        ConfigKey("model.embedding_dim"),
    ] = None,
    image_size: Annotated[
        int | None,
        typer.Option("--image-size", help="Crop size in pixels (eval resizes to size*8/7 first)."),
        ConfigKey("data.image_size"),
    ] = None,
    epochs: Annotated[
        int | None, typer.Option("--epochs", help="Training epochs."), ConfigKey("trainer.epochs")
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size", help="Images per step in each process (torchrun: the global batch is processes x this)."
        ),
        ConfigKey("trainer.batch_size"),
    ] = None,
    images_per_class: Annotated[
        int | None,
        typer.Option("--images-per-class", help="M of the class-balanced sampler."),
        ConfigKey("data.images_per_class"),
    ] = None,
    lr: Annotated[float | None, typer.Option("--lr", help="Backbone learning rate."), ConfigKey("optimizer.lr")] = None,
    device: Annotated[
        str | None, typer.Option("--device", help="auto (CUDA if present) | cpu | cuda."), ConfigKey("trainer.device")
    ] = None,
    pretrained: Annotated[
        str | None,
        typer.Option(
            "--pretrained",
            help="'imagenet' (built-in or locally cached ImageNet weights, never downloads), 'torchvision' or a state-dict file.",
        ),
        ConfigKey("model.pretrained"),
    ] = None,
    val_fraction: Annotated[
        float | None,
        typer.Option("--val-fraction", help="Share of training classes held out for validation."),
        ConfigKey("data.val_fraction"),
    ] = None,
    val_fold: Annotated[
        int | None,
        typer.Option("--val-fold", help="Validate on fold i of the training classes instead."),
        ConfigKey("data.val_fold"),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="DataLoader worker processes."), ConfigKey("data.num_workers")
    ] = None,
    on_bad_image: Annotated[
        str | None,
        typer.Option("--on-bad-image", help="skip (default) or fail on unreadable images."),
        ConfigKey("data.on_bad_image"),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed."), ConfigKey("trainer.seed")] = None,
    max_steps_per_epoch: Annotated[
        int | None,
        typer.Option("--max-steps-per-epoch", help="Cap steps per epoch (quick runs)."),
        ConfigKey("trainer.max_steps_per_epoch"),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Any config key, e.g. --set trainer.patience=3 (repeatable).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace the run already in --out (its checkpoints and export).")
    ] = False,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from RUN_DIR/checkpoints/last.pt with its saved config.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Fit an embedder: class-disjoint split, validation MAP@R picks the best epoch, test metrics at the end."""
    from retrieval.training.config import build_config, read_yaml
    from retrieval.training.distributed import DistContext
    from retrieval.training.interrupt import interrupt_at_safe_points
    from retrieval.training.recipes import describe_recipe
    from retrieval.training.recipes import recipe as recipe_layer
    from retrieval.training.run_dir import RunPaths, claim_run_dir
    from retrieval.training.trainer import Trainer

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    layers: list[tuple[str, dict[str, Any]]] = []
    claim_run_dir(out, resume=resume, overwrite=overwrite)
    saved = RunPaths(out).config
    if resume and saved.is_file():
        layers.append((str(saved), read_yaml(saved)))
    if recipe:
        layers.append((f"recipe {recipe}", recipe_layer(recipe)))
    if config:
        layers.append((str(config), read_yaml(config)))
    layers.append(("command-line options", _cli_layer(train, locals())))
    layers.append(("--set", _parse_set(set_ or [])))
    cfg = build_config(layers)
    ctx = DistContext.from_environment()  # torchrun sets RANK / WORLD_SIZE; a plain run is rank 0 of 1
    if recipe and ctx.is_main:
        logging.getLogger(__name__).info("recipe %s: %s", recipe, describe_recipe(recipe))
    trainer = Trainer(cfg, out, resume=resume, progress=not quiet, ctx=ctx)
    try:
        with interrupt_at_safe_points() as interrupt:
            trainer.stop_check = interrupt.check
            result = trainer.fit()
    except KeyboardInterrupt:
        if ctx.is_main:
            last = RunPaths(out).last_checkpoint
            kept = f"{last} holds the last finished epoch" if last.is_file() else "no epoch had finished"
            typer.secho(f"training interrupted: {kept}; continue with `retrieval train --out {out} --resume`", err=True)
        raise
    if ctx.is_main:
        _print_summary(result)


def _print_summary(result) -> None:
    typer.echo(f"run directory: {result.run_dir}  (best epoch {result.best_epoch} of {result.epochs_completed})")
    for kind in ("float", "binary"):
        metrics = result.test[kind]
        recall = ", ".join(f"R@{k} {v:.4f}" for k, v in metrics["recall_at_k"].items())
        typer.echo(f"test {kind:6s}: MAP@R {metrics['map_at_r']:.4f}  P@1 {metrics['precision_at_1']:.4f}  {recall}")
    for reference in ("pretrained", "untrained"):  # the starting weights on the same test classes
        if reference in result.test:
            before = result.test[reference]["float"]
            typer.echo(f"{reference} float: MAP@R {before['map_at_r']:.4f}  P@1 {before['precision_at_1']:.4f}")
    typer.echo(f"next: retrieval export {result.run_dir}")


def losses(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """List the registered losses with a one-line description each."""
    from retrieval.training.losses import available_losses, available_miners

    specs = available_losses()
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
        typer.echo(json.dumps({"losses": rows, "miners": available_miners()}, indent=2))
        return
    width = max(len(s.name) for s in specs)
    typer.echo(f"{'loss':<{width}}  {'family':6s}  {'sampler':8s}  {'default miner':18s}  description")
    for spec in specs:
        miner = spec.default_miner or "-"
        typer.echo(f"{spec.name:<{width}}  {spec.family:6s}  {spec.sampler:8s}  {miner:18s}  {spec.description}")
    typer.echo(f"\nminers: {', '.join(available_miners())}   (docs/losses.md has parameters and papers)")


def register(app: typer.Typer) -> None:
    app.command("train")(train)
    app.command("losses")(losses)
