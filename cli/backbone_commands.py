"""``retrieval backbones``: the backbones, which have ImageNet weights on this machine, and their stages."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer


def backbones(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """List the registered backbones: whether `--pretrained imagenet` finds their weights here (offline), the
    image size those weights were trained at, and the stages `--set model.frozen_stages=N` counts.

    Any timm model is a backbone too, as timm:NAME (its weights from the local Hugging Face cache)."""
    from retrieval.training.model.backbones import BACKBONES, get_backbone
    from retrieval.training.model.pretrained import imagenet_weights_here
    from retrieval.training.model.trunk_stages import trunk_stages

    rows: list[dict[str, Any]] = []
    for name in BACKBONES.names():
        trunk, features = get_backbone(name).build()
        rows.append(
            {
                "name": name,
                "imagenet_weights": imagenet_weights_here(name),
                "native_size": get_backbone(name).native_size or 224,
                "stages": len(trunk_stages(trunk)),
                "features": features,
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    width = max(len(row["name"]) for row in rows)
    typer.echo(f"{'backbone':<{width}}  {'size':>4}  {'stages':>6}  {'features':>8}  ImageNet weights on this machine")
    for row in rows:
        weights = row["imagenet_weights"] or "not here (--pretrained PATH, or copy them into the cache)"
        line = f"{row['name']:<{width}}  {row['native_size']:>4}  {row['stages']:>6}  {row['features']:>8}  {weights}"
        typer.echo(line)
    typer.echo("\nand timm:NAME for any timm model (weights from the local Hugging Face cache; never downloaded)")


def register(app: typer.Typer) -> None:
    app.command("backbones")(backbones)
