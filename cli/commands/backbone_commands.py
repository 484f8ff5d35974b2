"""``retrieval backbones``: the backbones, their size and stages, and where their pretrained weights are or come from
(from the torch-free table ``backbone_facts``: the listing never imports torch)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from retrieval.cli.options.train_options import WeightsCache
from retrieval.training.config.hub_access import hub_access
from retrieval.training.model.trunks.backbone_facts import (
    BACKBONE_FACTS,
    MEASURED_CPU_IMAGES_PER_S,
    weights_from,
    weights_here,
)


def backbones(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    weights_cache: WeightsCache = None,
) -> None:
    """List the registered backbones: their parameters, the image size their pretrained weights were trained at,
    the stages `--set model.frozen_stages=N` counts, their feature width, the embedding images/s measured on a
    2-core CPU (fp32 / INT8 ONNX, where measured), and where `--pretrained imagenet` finds
    their weights here (offline) or, when not here, where they would come from.

    Any timm model is a backbone too, as timm:NAME (its weights from the weights cache: --weights-cache, else
    RETRIEVAL_WEIGHTS_CACHE, else the Hugging Face cache)."""
    cache_dir = hub_access(weights_cache=weights_cache).cache_dir
    rows = [backbone_row(name, cache_dir) for name in BACKBONE_FACTS]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    width = max(len(row["name"]) for row in rows)
    header = f"{'backbone':<{width}}  {'params':>7}  {'size':>4}  {'stages':>6}  {'features':>8}  {'CPU img/s':>12}"
    typer.echo(f"{header}  pretrained weights")
    for row in rows:
        weights = row["imagenet_weights"] or f"not here (from {row['weights_from']})"
        millions = f"{row['parameters'] / 1e6:.1f}M"
        speed = row["cpu_images_per_s"]
        measured = f"{speed['fp32']:.1f} / {speed['int8']:.1f}" if speed else "-"
        typer.echo(
            f"{row['name']:<{width}}  {millions:>7}  {row['native_size']:>4}  {row['stages']:>6}  "
            f"{row['features']:>8}  {measured:>12}  {weights}"
        )
    from huggingface_hub import constants

    typer.echo(
        "\nCPU img/s: embedding images per second, fp32 / INT8 ONNX, batch 32 at 224 px, measured on a 2-core CPU "
        "(bench/bench_vit_cost.py, docs/results.md); -: not measured"
    )
    typer.echo(
        "and timm:NAME for any timm model (timm:NAME.TAG: its weights with --pretrained hub); nothing is downloaded "
        f"without --allow-download; the transformers' weights are looked for in {cache_dir or constants.HF_HUB_CACHE}"
    )


def backbone_row(name: str, cache_dir: str | None = None) -> dict[str, Any]:
    """One line of the listing, from the torch-free table ``backbone_facts``; the weights looked up in the
    weights cache ``cache_dir`` (None: the Hugging Face cache) for the transformers."""
    facts = BACKBONE_FACTS[name]
    speed = MEASURED_CPU_IMAGES_PER_S.get(name)
    return {
        "name": name,
        "parameters": facts.parameters,
        "imagenet_weights": weights_here(name, cache_dir),
        "weights_from": weights_from(name),
        "native_size": facts.native_size,
        "stages": facts.stages,
        "features": facts.features,
        "cpu_images_per_s": {"fp32": speed[0], "int8": speed[1]} if speed else None,
    }


def register(app: typer.Typer) -> None:
    app.command("backbones")(backbones)
