"""One config assembler: ``retrieval train`` and the Python API's ``train()`` resolve the same
``TrainConfig`` from the same options (a recipe, a config file, options, a resumed run's saved config),
and both refuse an ensemble with a final fit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.training import usecases as api
from retrieval.training.config.config_resolver import resolve_config
from retrieval.training.config.train_config import build_config, config_yaml
from retrieval.training.config.train_request import API, CLI, TrainRequest, refuse_conflicts


def cli_config(*args: str) -> dict[str, Any]:
    """The configuration ``retrieval train ARGS --print-config`` resolves, as a dict."""
    result = CliRunner().invoke(app, ["train", "--print-config", *args])
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.stdout)


def api_config(data: Path | None, out: Path, *, resume: bool = False, **options: Any) -> dict[str, Any]:
    """The configuration ``api.train(data, out, ...)`` would train with, as a dict."""
    recipe, config = options.pop("recipe", None), options.pop("config", None)
    request = api._train_request(data, out, recipe, config, resume, options)
    return resolve_config(request).model_dump(mode="json")


def test_the_cli_and_the_api_resolve_the_same_config_from_the_same_options(tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text("trainer:\n  epochs: 5\n  patience: 4\nmodel:\n  pooling: max\n")
    data, run = tmp_path / "data", tmp_path / "run"
    cli = cli_config(
        *("--data", str(data), "--out", str(run), "--recipe", "triplet", "--config", str(config)),
        *("--epochs", "3", "--lr", "0.002", "--workers", "0", "--final-fit", "--set", "trainer.patience=2"),
    )
    python = api_config(
        data, run, recipe="triplet", config=config, epochs=3, optimizer__lr=0.002, num_workers=0, final_fit=True,
        trainer__patience=2,
    )  # fmt: skip
    assert cli == python
    trainer = cli["trainer"]  # option > file > recipe: hand-read from the layers above
    assert (trainer["epochs"], trainer["patience"], trainer["final_fit"]) == (3, 2, True)
    assert cli["optimizer"]["lr"] == 0.002 and cli["data"]["num_workers"] == 0 and cli["data"]["path"] == str(data)
    assert cli["model"]["pooling"] == "max" and cli["loss"]["name"] == "triplet"


@pytest.mark.parametrize("first_fit", [False, True])
def test_resume_reads_the_saved_config_in_both(tmp_path: Path, first_fit: bool) -> None:
    """A resumed run starts from its saved config.yaml (a final-fit run's from selection/), options on top."""
    run = tmp_path / "run"
    saved = build_config([("saved", {"trainer": {"epochs": 7, "seed": 11}, "data": {"path": "photos"}})])
    folder = run / "selection" if first_fit else run
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(config_yaml(saved))
    if first_fit:  # the final fit's own config says otherwise; the request is the first fit's
        (run / "config.yaml").write_text(config_yaml(saved).replace("seed: 11", "seed: 99"))
    cli = cli_config("--out", str(run), "--resume", "--epochs", "9")
    python = api_config(None, run, resume=True, epochs=9)
    assert cli == python
    assert (cli["trainer"]["epochs"], cli["trainer"]["seed"], cli["data"]["path"]) == (9, 11, "photos")
    fresh = api_config(None, run, epochs=9)  # without resume the saved config is not read
    assert fresh["trainer"]["seed"] != 11 and fresh["data"]["path"] != "photos"


def test_an_ensemble_refuses_a_final_fit_in_the_cli_and_the_api(synth_data: Path, tmp_path: Path) -> None:
    args = ["train", "--data", str(synth_data), "--out", str(tmp_path / "run"), "--ensemble", "2", "--final-fit"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0
    message = "--ensemble trains on the class-disjoint split; leave out --final-fit and --split none"
    assert isinstance(result.exception, ConfigError) and str(result.exception) == message
    every_class = api.config(data={"path": str(synth_data), "split": "none"})
    with pytest.raises(ConfigError, match=r"^train_ensemble\(\) trains on the class-disjoint split"):
        api.train_ensemble(every_class, tmp_path / "ens", members=2)
    assert not (tmp_path / "ens").exists()  # refused before the run directory is claimed


def test_the_rules_between_options_are_one_function() -> None:
    plain = build_config([])
    final_fit = build_config([("o", {"trainer": {"final_fit": True}})])
    refuse_conflicts(plain, ensemble=True)  # an ensemble on the class-disjoint split
    refuse_conflicts(final_fit, ensemble=False)  # a final fit alone
    with pytest.raises(ConfigError, match="leave out --final-fit and --split none"):
        refuse_conflicts(final_fit, ensemble=True, spelling=CLI)
    with pytest.raises(ConfigError, match="leave out trainer.final_fit and data.split='none'"):
        resolve_config(TrainRequest(options={"trainer": {"final_fit": True}}, ensemble=True, spelling=API))


def test_the_cli_and_the_api_hand_one_request_to_run_train(
    synth_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``retrieval train`` and ``train()`` both call ``run_train`` (the one train use case) with the same
    request but for the spelling of their messages and the options' layer name."""
    seen: list[TrainRequest] = []
    monkeypatch.setattr(api, "run_train", lambda request, **_: seen.append(request))
    run = tmp_path / "run"
    CliRunner().invoke(app, ["train", "--data", str(synth_data), "--out", str(run), "--epochs", "0", "--overwrite"])
    with pytest.raises(AssertionError):  # the stand-in returns no TrainedRun
        api.train(synth_data, run, epochs=0, overwrite=True)
    cli, python = seen
    assert (cli.out, cli.overwrite, cli.members, cli.resume) == (python.out, python.overwrite, None, False)
    assert cli.out == run and cli.overwrite
    assert resolve_config(cli) == resolve_config(python)


def test_run_train_claims_nothing_when_the_config_is_bad(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("old run")  # a run an overwrite would replace
    request = TrainRequest(options={"trainer": {"epochs": -1}}, out=run, overwrite=True, spelling=API)
    with pytest.raises(ConfigError):
        api.run_train(request)
    assert (run / "config.yaml").read_text() == "old run"
