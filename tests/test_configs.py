"""The example configs in configs/ (and the one in docs/training.md) load, validate, are what their
comments say they are, and run: the demo config trains, exports and indexes as documented."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import TrainConfig, build_config, merge_dicts, read_yaml
from retrieval.training.losses import get_loss_spec
from retrieval.training.model.trunks.backbones import get_backbone

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
runner = CliRunner()

# Each config is documented as a recipe plus options: run B of docs/results.md, and scripts/demo.sh as it was.
RUN_B: dict[str, Any] = {
    "model": {"backbone": "efficientnet_lite0", "pretrained": "imagenet", "freeze_batchnorm": True},
    "data": {"image_size": 224, "num_workers": 2},
    "optimizer": {"lr": 3e-5, "head_lr": 3e-4},
    "trainer": {"epochs": 10, "batch_size": 32, "warm_start_epochs": 0},
}
DOCUMENTED: dict[str, tuple[str, dict[str, Any]]] = {
    "demo.yaml": (
        "normsoftmax",
        {
            "model": {"backbone": "resnet18", "embedding_dim": 2048},
            "data": {"image_size": 64, "val_fraction": 0.25},
            "trainer": {"epochs": 8, "batch_size": 64, "device": "auto"},
            "optimizer": {"lr": 1e-3},
        },
    ),
    "cub50_normsoftmax.yaml": ("normsoftmax", RUN_B),
    "cub50_multi_similarity.yaml": ("multi_similarity", merge_dicts(RUN_B, {"data": {"sampler": "balanced"}})),
    "cub50_proxy_anchor.yaml": ("proxy_anchor", RUN_B),
    # the cars196 rows of docs/results.md: run B with the stem and first three block stages frozen, then
    # the whitening stage validation chooses
    "cars196.yaml": (
        "normsoftmax",
        merge_dicts(RUN_B, {"model": {"frozen_stages": 4}, "whitening": {"method": "auto"}}),
    ),
}


def load(path: Path) -> TrainConfig:
    return build_config([(str(path), read_yaml(path))])


def without_loss_params(config: TrainConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the config without loss.params, the loss params over the loss's defaults)."""
    params = {**get_loss_spec(config.loss.name).default_params, **config.loss.params}
    return config.model_copy(update={"loss": config.loss.model_copy(update={"params": {}})}).model_dump(), params


def test_every_config_is_covered() -> None:
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(DOCUMENTED)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_a_config_is_the_recipe_and_options_it_documents(name: str) -> None:
    config = load(CONFIGS / name)
    recipe_name, options = DOCUMENTED[name]
    expected = build_config([("recipe", recipe(recipe_name)), ("options", options)])
    assert without_loss_params(config) == without_loss_params(expected)
    get_backbone(config.model.backbone)  # a registered backbone (an unknown one lists the known ones)
    assert config.data.path is None  # the data comes from --data, as each file's comment shows
    assert f"--config configs/{name}" in (CONFIGS / name).read_text()


def test_the_docs_example_is_a_config_that_runs_offline() -> None:
    """docs/training.md shows config files: each is a file of configs/ (its settings, without the
    comments) and loads its pretrained weights with no download."""
    import torch

    from retrieval.training.model.embedding_model import build_embedding_model
    from retrieval.training.model.pretrained import load_pretrained

    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "training.md").read_text(), re.S)
    assert blocks, "docs/training.md has no yaml example"
    for block in blocks:
        first, *settings = block.splitlines()
        assert re.fullmatch(r"# configs/\S+\.yaml", first), "a yaml example names its file on its first line"
        path = ROOT / first[2:]
        assert settings == [line for line in path.read_text().splitlines() if not line.startswith("#")]
        config = load(path)
        if config.model.pretrained:
            torch.manual_seed(0)
            report = load_pretrained(build_embedding_model(config.model), config.model.pretrained)
            assert report.loaded > 0 and report.missing == 0, report.summary()


@pytest.mark.slow
def test_the_demo_config_trains_and_each_step_prints_the_next(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    trained = runner.invoke(
        app,
        ["train", "--config", str(CONFIGS / "demo.yaml"), "--data", str(synth_data), "--out", str(run),
         "--epochs", "1", "--max-steps-per-epoch", "1", "--workers", "0", "--device", "cpu", "--quiet"],
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    assert f"next: retrieval export {run}" in trained.output
    exported = runner.invoke(app, ["export", str(run)])
    assert exported.exit_code == 0, exported.output
    splits = split_records(load_records(synth_data))
    manifest = json.loads((run / "export" / "model.json").read_text())
    assert manifest["training_classes"] == splits.train_classes + splits.val_classes  # the first 12 classes
    build = next_command(exported.output)
    assert build[:2] == ["index", "build"] and "--split" in build
    built = runner.invoke(app, build)
    assert built.exit_code == 0, built.output
    evaluate = next_command(built.output) + ["--out", str(tmp_path / "eval"), "--grid", "0"]
    assert evaluate[:2] == ["eval", "--index"]
    evaluated = runner.invoke(app, evaluate)
    assert evaluated.exit_code == 0 and "warning" not in evaluated.output  # the test split: unseen classes only
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["num_queries"] == len(splits.test)


def next_command(output: str) -> list[str]:
    """The arguments of the ``next: retrieval ...`` line a command printed (up to any parenthesis)."""
    line = next(line for line in output.splitlines() if line.startswith("next: retrieval "))
    return shlex.split(line[len("next: retrieval ") :].split("(")[0])
