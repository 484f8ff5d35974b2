"""``retrieval train`` and ``retrieval losses``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

import typer

from retrieval.indexing.common.errors import ConfigError


def _cli_layer(**options: Any) -> dict[str, Any]:
    """Map command-line options onto config keys; options left unset do not override anything."""
    where = {
        "data": ("data", "path"), "loss": ("loss", "name"), "backbone": ("model", "backbone"),
        "embedding_dim": ("model", "embedding_dim"), "pretrained": ("model", "pretrained"),
        "image_size": ("data", "image_size"), "images_per_class": ("data", "images_per_class"),
        "workers": ("data", "num_workers"), "on_bad_image": ("data", "on_bad_image"),
        "val_fraction": ("data", "val_fraction"), "val_fold": ("data", "val_fold"),
        "epochs": ("trainer", "epochs"), "batch_size": ("trainer", "batch_size"), "device": ("trainer", "device"),
        "seed": ("trainer", "seed"), "max_steps_per_epoch": ("trainer", "max_steps_per_epoch"),
        "lr": ("optimizer", "lr"),
    }
    layer: dict[str, Any] = {}
    for option, value in options.items():
        if value is not None:
            section, key = where[option]
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
    data: Optional[Path] = typer.Option(None, "--data", help="ImageFolder dir, CSV manifest, or CUB/Cars196/SOP/In-Shop root."),
    out: Path = typer.Option(..., "--out", help="Run directory (config, metrics.jsonl, checkpoints, curves.png)."),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML config; CLI options override it."),
    recipe: Optional[str] = typer.Option(None, "--recipe", help="Start from a loss's paper defaults, e.g. normsoftmax, triplet."),
    loss: Optional[str] = typer.Option(None, "--loss", help="Loss name (see `retrieval losses`)."),
    backbone: Optional[str] = typer.Option(None, "--backbone", help="resnet18|resnet34|resnet50|densenet121|mobilenet_v3_large ..."),
    embedding_dim: Optional[int] = typer.Option(None, "--embedding-dim", help="Embedding size (bits of the binary index)."),
    image_size: Optional[int] = typer.Option(None, "--image-size", help="Crop size in pixels (eval resizes to size*8/7 first)."),
    epochs: Optional[int] = typer.Option(None, "--epochs"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size"),
    images_per_class: Optional[int] = typer.Option(None, "--images-per-class", help="M of the class-balanced sampler."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Backbone learning rate."),
    device: Optional[str] = typer.Option(None, "--device", help="auto (CUDA if present) | cpu | cuda."),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="'torchvision' (local cache, never downloads) or a state-dict file."),
    val_fraction: Optional[float] = typer.Option(None, "--val-fraction", help="Share of training classes held out for validation."),
    val_fold: Optional[int] = typer.Option(None, "--val-fold", help="Validate on fold i of the training classes instead."),
    workers: Optional[int] = typer.Option(None, "--workers", help="DataLoader worker processes."),
    on_bad_image: Optional[str] = typer.Option(None, "--on-bad-image", help="skip (default) or fail on unreadable images."),
    seed: Optional[int] = typer.Option(None, "--seed"),
    max_steps_per_epoch: Optional[int] = typer.Option(None, "--max-steps-per-epoch", help="Cap steps per epoch (quick runs)."),
    set_: list[str] = typer.Option([], "--set", help="Any config key, e.g. --set trainer.patience=3 (repeatable)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from RUN_DIR/checkpoints/last.pt with its saved config."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
) -> None:
    """Fit an embedder: class-disjoint split, validation MAP@R picks the best epoch, test metrics at the end."""
    from retrieval.training.config import build_config, read_yaml
    from retrieval.training.distributed import DistContext
    from retrieval.training.recipes import recipe as recipe_layer
    from retrieval.training.run_dir import RunPaths
    from retrieval.training.trainer import Trainer

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    layers: list[tuple[str, dict[str, Any]]] = []
    saved = RunPaths(out).config
    if resume and saved.is_file():
        layers.append((str(saved), read_yaml(saved)))
    if recipe:
        layers.append((f"recipe {recipe}", recipe_layer(recipe)))
    if config:
        layers.append((str(config), read_yaml(config)))
    options = dict(
        data=data, loss=loss, backbone=backbone, embedding_dim=embedding_dim, image_size=image_size, epochs=epochs,
        batch_size=batch_size, images_per_class=images_per_class, lr=lr, device=device, pretrained=pretrained,
        val_fraction=val_fraction, val_fold=val_fold, workers=workers, on_bad_image=on_bad_image, seed=seed,
        max_steps_per_epoch=max_steps_per_epoch,
    )
    layers.append(("command-line options", _cli_layer(**options)))
    layers.append(("--set", _parse_set(set_)))
    cfg = build_config(layers)
    ctx = DistContext.from_environment()  # torchrun sets RANK / WORLD_SIZE; a plain run is rank 0 of 1
    result = Trainer(cfg, out, resume=resume, progress=not quiet, ctx=ctx).fit()
    if ctx.is_main:
        _print_summary(result)


def _print_summary(result) -> None:
    typer.echo(f"run directory: {result.run_dir}  (best epoch {result.best_epoch} of {result.epochs_completed})")
    for kind in ("float", "binary"):
        metrics = result.test[kind]
        recall = ", ".join(f"R@{k} {v:.4f}" for k, v in metrics["recall_at_k"].items())
        typer.echo(f"test {kind:6s}: MAP@R {metrics['map_at_r']:.4f}  P@1 {metrics['precision_at_1']:.4f}  {recall}")
    if "untrained" in result.test:
        before = result.test["untrained"]["float"]
        typer.echo(f"untrained float: MAP@R {before['map_at_r']:.4f}  P@1 {before['precision_at_1']:.4f}")
    typer.echo(f"next: retrieval export {result.run_dir}")


def losses(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the registered losses with a one-line description each."""
    from retrieval.training.losses import available_losses, available_miners

    specs = available_losses()
    if as_json:
        rows = [
            {"name": s.name, "family": s.family, "sampler": s.sampler, "default_miner": s.default_miner,
             "description": s.description}
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
