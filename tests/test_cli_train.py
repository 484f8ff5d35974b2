"""The ``retrieval`` command as a user meets it: one-sentence errors, exit code 2, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

RETRIEVAL = [sys.executable, "-c", "from retrieval.cli.main import main; main()"]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([*RETRIEVAL, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_unknown_config_key_is_named_without_traceback(synth_data: Path, tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text("trainer:\n  epoch: 3\n")
    result = run_cli("train", "--data", str(synth_data), "--out", str(tmp_path / "run"), "--config", str(config))
    assert result.returncode == 2
    assert "trainer.epoch: unknown key" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_missing_dataset_and_bad_set_option(tmp_path: Path) -> None:
    result = run_cli("train", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert str(tmp_path / "missing") in result.stderr
    result = run_cli("train", "--data", str(tmp_path), "--out", str(tmp_path / "run"), "--set", "trainer.patience")
    assert result.returncode == 2 and "--set expects KEY=VALUE" in result.stderr


def test_unknown_loss_and_recipe_list_the_known_names(synth_data: Path, tmp_path: Path) -> None:
    result = run_cli("train", "--data", str(synth_data), "--out", str(tmp_path / "r"), "--loss", "tripletloss")
    assert result.returncode == 2 and "known losses:" in result.stderr and "triplet" in result.stderr
    result = run_cli("train", "--data", str(synth_data), "--out", str(tmp_path / "r"), "--recipe", "nope")
    assert result.returncode == 2 and "known recipes:" in result.stderr


def test_too_few_classes_is_one_sentence_before_training(tmp_path: Path) -> None:
    from PIL import Image

    for label in ("a", "b"):
        (tmp_path / "data" / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (16, 16), (i * 40, 0, 0)).save(tmp_path / "data" / label / f"{i}.png")
    result = run_cli("train", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "class" in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_losses_command_lists_every_loss() -> None:
    result = run_cli("losses")
    assert result.returncode == 0
    for name in ("normalized_softmax", "triplet", "multi_similarity", "proxy_anchor", "arcface", "soft_triple"):
        assert name in result.stdout


@pytest.mark.slow
def test_train_then_export_on_the_command_line(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = run_cli(
        "train",
        "--data",
        str(synth_data),
        "--out",
        str(run),
        "--recipe",
        "triplet",
        "--image-size",
        "32",
        "--embedding-dim",
        "32",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--max-steps-per-epoch",
        "2",
        "--workers",
        "0",
        "--device",
        "cpu",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "test float" in result.stdout and "MAP@R" in result.stdout
    summary = {line.split()[0]: " ".join(line.split()[1:]) for line in result.stderr.splitlines() if line.strip()}
    assert summary["run"] == str(run) and summary["device"] == "cpu (float32)"
    # synth_data: 24 classes x 12 images; the first 12 classes train, round(0.2 x 12) = 2 of them validate
    split = "train 10 classes / 120 images, val 2 classes / 24 images, test 12 classes / 144 images"
    assert summary["data"] == f"{synth_data}: {split}"
    assert summary["model"] == "resnet18, random initialisation, 32-d embedding, 32 px crops"
    assert summary["loss"].startswith("triplet(") and "margin=0.1" in summary["loss"]  # the recipe's margin
    assert summary["loss"].endswith("miner: semi_hard_triplet")  # triplet's default mining
    assert summary["batches"] == "16 images (class-balanced, 4 classes x 4 images), 2 steps per epoch"
    assert summary["epochs"] == "1 (1 warm-start epoch training only the new layers)"
    result = run_cli("export", str(run))
    assert result.returncode == 0, result.stderr[-2000:]
    assert (run / "export" / "model.onnx").is_file() and (run / "export" / "model.json").is_file()


@pytest.mark.slow
def test_an_epochs_0_run_says_no_loss_or_optimizer_and_its_verdict_once(synth_data: Path, tmp_path: Path) -> None:
    args = ["--image-size", "32", "--embedding-dim", "16", "--workers", "0", "--device", "cpu", "--quiet"]
    result = run_cli("train", "--data", str(synth_data), "--out", str(tmp_path / "run"), "--epochs", "0", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = {line.split()[0]: " ".join(line.split()[1:]) for line in result.stderr.splitlines() if line.strip()}
    assert not {"loss", "batches", "optimizer"} & set(summary)  # no step runs: nothing of the kind to tell
    assert summary["epochs"].startswith("0 (no training: the ")
    verdict = json.loads((tmp_path / "run" / "test_metrics.json").read_text())["verdict"]["sentence"]
    assert (result.stdout + result.stderr).count(verdict) == 1  # it was printed twice (the log, then the summary)
    assert f"verdict: {verdict}" in result.stdout


def test_every_train_option_names_a_real_config_key() -> None:
    """The options come from the one table (with their config key); each key must exist in TrainConfig."""
    from retrieval.cli.commands.train_commands import train
    from retrieval.cli.options.config_options import config_keys
    from retrieval.training.config.train_config import TrainConfig

    keys = [option.option.key for option in config_keys(train).values()]
    assert len(keys) >= 15
    for path in keys:
        section, key = path.split(".")
        assert key in TrainConfig.model_fields[section].annotation.model_fields, path


def _train_options() -> list:
    """The click options typer built for ``retrieval train`` (what the user actually meets)."""
    import typer

    from retrieval.cli.main import app

    group = typer.main.get_command(app)
    train = group.get_command(typer.Context(group), "train")  # type: ignore[attr-defined]
    return [param for param in train.params if param.opts[0] != "--help"]


def _config_key_options() -> dict[str, tuple[str, type]]:
    """``--flag`` -> (config key, value type) for every ``train`` option that sets a config key."""
    from typing import get_args, get_type_hints

    from retrieval.cli.commands.train_commands import train
    from retrieval.cli.options.config_options import config_keys

    hints, keyed = get_type_hints(train, include_extras=True), config_keys(train)
    options = {}
    for option in _train_options():
        if option.name in keyed:
            value_type = get_args(hints[option.name])[0]
            key = keyed[option.name].option.key
            options[option.opts[0]] = (key, next(t for t in get_args(value_type) if t is not type(None)))
    return options


def test_every_train_option_sets_its_config_key_over_the_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each option's value reaches its config key (command line over --recipe); the rest keep their defaults."""
    from typer.testing import CliRunner

    import retrieval.training.usecases
    from retrieval.cli.main import app
    from retrieval.training.config.train_config import TrainConfig

    class Configured(Exception):
        pass

    def capture(cfg: TrainConfig, *args: object, **kwargs: object) -> None:
        raise Configured(cfg)

    monkeypatch.setattr(retrieval.training.usecases, "fit_run", capture)  # what run_train calls
    for label in ("a", "b"):  # the data and its split are checked before torch loads: a real (tiny) ImageFolder
        (tmp_path / "data" / label).mkdir(parents=True)
        for number in range(2):  # a class of one image is left out of every split
            Image.new("RGB", (8, 8)).save(tmp_path / "data" / label / f"{number}.png")
    strings = {"--loss": "triplet", "--backbone": "resnet34", "--device": "cpu", "--on-bad-image": "fail"}
    strings["--split"] = "none"
    values: dict[type, object] = {int: 33, float: 0.25, Path: tmp_path / "data"}
    args, expected = ["train", "--out", str(tmp_path / "run"), "--recipe", "normsoftmax"], {}
    options = _config_key_options()
    assert len(options) >= 15
    for flag, (key, value_type) in options.items():
        if value_type is bool:  # a flag: given means on
            args.append(flag)
            expected[key] = True
            continue
        value = strings.get(flag, "weights.pt") if value_type is str else values[value_type]
        args += [flag, str(value)]
        expected[key] = value
    result = CliRunner().invoke(app, [*args, "--set", "trainer.patience=2"])
    assert isinstance(result.exception, Configured), result.output
    cfg = result.exception.args[0].model_dump()
    for key, value in expected.items():
        section, name = key.split(".")
        assert cfg[section][name] == value, key
    assert cfg["trainer"]["patience"] == 2 and cfg["loss"]["params"] == {"temperature": 0.05}  # --set and recipe
    assert cfg["model"]["pooling"] == "avg"  # no option for it: the recipe/default value stays


def test_train_help_lists_every_option_with_its_help() -> None:
    from typer.testing import CliRunner

    from retrieval.cli.main import app

    result = CliRunner().invoke(app, ["train", "--help"], terminal_width=300, env={"COLUMNS": "300"})
    assert result.exit_code == 0
    output = " ".join(result.output.split())
    options = _train_options()
    assert len(options) >= 20 and all(option.help for option in options)
    for option in options:
        assert option.opts[0] in output and " ".join(option.help.split()) in output, option.opts[0]


def _help_rows(*command: str) -> dict[str, str]:
    """``--option`` -> its row of the rendered ``--help`` (continuation lines joined)."""
    import re

    from typer.testing import CliRunner

    from retrieval.cli.main import app

    result = CliRunner().invoke(app, [*command, "--help"], terminal_width=300, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    rows: dict[str, str] = {}
    current = None
    for line in result.output.splitlines():
        match = re.match(r"^  (--[\w-]+)", line)
        if match:
            current = match.group(1)
            rows[current] = line
        elif current and line.startswith("   "):  # a continuation of the option's help
            rows[current] += " " + line.strip()
        else:
            current = None
    return rows


def test_train_help_shows_the_default_each_option_stands_for() -> None:
    """Every option that takes a value shows its default: the configuration's, then where the
    zhai_wu recipe (the one that changes command-line keys) sets another; flags show no type."""
    import re

    from retrieval.training.config.recipes import recipe
    from retrieval.training.config.train_config import TrainConfig

    rows = _help_rows("train")
    for option in _train_options():
        row = rows[option.opts[0]]
        assert "<bool>" not in row, row
        if not option.is_flag:
            assert "[default: (" in row, row
    defaults, zhai_wu = TrainConfig().model_dump(), recipe("zhai_wu")
    for flag, (key, _) in _config_key_options().items():
        section, name = key.split(".")
        shown = re.search(r"\[default: \((.*?)\)\]", rows[flag]).group(1).split("; ")
        default = defaults[section][name]
        if isinstance(default, bool):
            assert shown[0] == ("on" if default else "off"), flag
        elif isinstance(default, float):
            assert float(shown[0]) == default, flag
        else:
            assert shown[0] == ("none" if default is None else str(default)), flag
        other = zhai_wu.get(section, {}).get(name, default)
        assert (other != default) == any(part.startswith("--recipe zhai_wu: ") for part in shown), flag
    assert "[default: (10; --recipe zhai_wu: 31)]" in rows["--epochs"]
    assert "[default: (0.0001; --recipe zhai_wu: 0.01)]" in rows["--lr"]
    assert "[default: (2048)]" in rows["--embedding-dim"] and "[default: (off)]" in rows["--tensorboard"]


def test_no_command_shows_flags_as_taking_a_value() -> None:
    """typer prints every option's type; a flag (``--quiet``, ``--help``) must not read as ``--quiet <bool>``."""
    import click
    import typer

    from retrieval.cli.main import app

    def paths(command: click.Command, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = [prefix]
        if hasattr(command, "list_commands"):  # a group (the top-level one loads each command when named)
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                found += paths(command.get_command(ctx, name), (*prefix, name))
        return found

    commands = paths(typer.main.get_command(app), ())
    assert len(commands) >= 15  # the app, its groups and their commands
    for command in commands:
        rows = _help_rows(*command)
        assert rows["--help"] and all("<bool>" not in row for row in rows.values()), command
    assert "--quiet" in _help_rows("index", "build") and "--quiet" in _help_rows("eval")


def test_print_config_prints_the_resolved_configuration_and_touches_nothing(tmp_path: Path) -> None:
    import yaml
    from typer.testing import CliRunner

    from retrieval.cli.main import app
    from retrieval.training.config.recipes import recipe
    from retrieval.training.config.train_config import TrainConfig, build_config, read_yaml

    config = tmp_path / "cfg.yaml"
    config.write_text("trainer:\n  epochs: 5\n  eval_batch_size: 7\nmodel:\n  pooling: max\n")
    run, data = tmp_path / "run", tmp_path / "no-data-here"
    args = ["train", "--print-config", "--recipe", "triplet", "--config", str(config), "--data", str(data)]
    result = CliRunner().invoke(app, [*args, "--epochs", "3", "--out", str(run), "--set", "trainer.patience=2"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout)
    expected = build_config(
        [
            ("recipe", recipe("triplet")),
            ("file", read_yaml(config)),
            ("options", {"trainer": {"epochs": 3}, "data": {"path": str(data)}}),
            ("--set", {"trainer": {"patience": 2}}),
        ]
    )
    assert printed == expected.model_dump(mode="json") and TrainConfig.model_validate(printed) == expected
    trainer = printed["trainer"]
    assert (trainer["epochs"], trainer["eval_batch_size"], trainer["patience"]) == (3, 7, 2)  # option > file
    assert printed["model"]["pooling"] == "max" and printed["loss"]["params"]["margin"] == 0.1  # file, recipe
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cfg.yaml"]  # no run directory, no data read
    saved = tmp_path / "printed.yaml"
    saved.write_text(result.stdout)
    again = CliRunner().invoke(app, ["train", "--print-config", "--config", str(saved)])  # no --out needed
    assert again.exit_code == 0 and again.stdout == result.stdout


def test_train_without_out_is_one_sentence(synth_data: Path) -> None:
    from typer.testing import CliRunner

    from retrieval.cli.main import app
    from retrieval.indexing.common.errors import ConfigError

    result = CliRunner().invoke(app, ["train", "--data", str(synth_data)])
    assert isinstance(result.exception, ConfigError) and "--out is required" in str(result.exception)
