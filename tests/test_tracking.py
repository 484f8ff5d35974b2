"""``trainer.tensorboard`` (``retrieval train --tensorboard``): the event files hold what metrics.jsonl holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import build_config
from retrieval.training.run.fitting.trainer import Trainer
from retrieval.training.run.outputs.tracking import open_tracker

EPOCHS, STEPS = 2, 3


def _events(log_dir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0})
    accumulator.Reload()
    return accumulator


def _scalars(events, tag: str) -> dict[int, float]:
    return {event.step: event.value for event in events.Scalars(tag)}


@pytest.fixture(scope="module")
def tracked_run(synth_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    quick = {
        "data": {"path": str(synth_data), "image_size": 32, "num_workers": 0, "val_fraction": 0.25},
        "model": {"backbone": "resnet18", "embedding_dim": 32},
        "optimizer": {"head_lr": 1e-3},  # three learning-rate groups that differ
        "trainer": {
            "epochs": EPOCHS,
            "batch_size": 16,
            "device": "cpu",
            "max_steps_per_epoch": STEPS,
            "tensorboard": True,
        },
    }
    cfg = build_config([("recipe", recipe("normsoftmax")), ("test", quick)])
    run = tmp_path_factory.mktemp("tracked") / "run"
    Trainer(cfg, run, progress=False).fit()
    return run


def test_event_files_hold_the_metrics_jsonl_values(tracked_run: Path) -> None:
    rows = [json.loads(line) for line in (tracked_run / "metrics.jsonl").read_text().splitlines()]
    events = _events(tracked_run / "tensorboard")
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/epoch_loss", "lr/backbone", "lr/head", "lr/loss", "val/map_at_r", "epoch"} <= tags
    assert {"val/recall_at_1", "val/precision_at_1", "val/r_precision", "train/images_per_second"} <= tags
    step_loss = _scalars(events, "train/loss")
    assert sorted(step_loss) == list(range(1, EPOCHS * STEPS + 1))  # every optimizer step
    for row in rows:
        step = row["global_step"]
        assert _scalars(events, "epoch")[step] == row["epoch"]
        assert _scalars(events, "val/map_at_r")[step] == pytest.approx(row["val"]["map_at_r"], rel=1e-6)
        assert _scalars(events, "val/recall_at_1")[step] == pytest.approx(row["val"]["recall_at_k"]["1"], rel=1e-6)
        if row["epoch"] == 0:  # the untrained validation has no training numbers
            assert step == 0 and step not in _scalars(events, "train/epoch_loss")
            continue
        assert _scalars(events, "train/epoch_loss")[step] == pytest.approx(row["train_loss"], rel=1e-6)
        assert _scalars(events, "lr/backbone")[step] == pytest.approx(row["lr"], rel=1e-6)
        epoch_steps = range(step - STEPS + 1, step + 1)  # the epoch's loss is the mean of its steps' losses
        assert np.mean([step_loss[s] for s in epoch_steps]) == pytest.approx(row["train_loss"], rel=1e-5)
    head, backbone = _scalars(events, "lr/head"), _scalars(events, "lr/backbone")
    assert head[1] == pytest.approx(10 * backbone[1], rel=1e-6)  # head_lr 1e-3 vs the recipe's lr 1e-4


def test_event_files_hold_retrieval_grids(tracked_run: Path) -> None:
    events = _events(tracked_run / "tensorboard")
    val_grids = events.Images("val/retrieval_grid")
    test_grids = events.Images("test/retrieval_grid")
    assert [image.step for image in val_grids] == [0, STEPS, 2 * STEPS]  # untrained, then every epoch
    assert [image.step for image in test_grids] == [EPOCHS * STEPS]  # the best weights, after training
    assert val_grids[0].width > val_grids[0].height > 100  # 6 query rows x (1 + 8 neighbours)


def test_missing_tensorboard_is_one_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # makes the import fail
    with pytest.raises(ConfigError, match=r"pip install 'retrieval\[tracking\]'"):
        open_tracker(tmp_path, enabled=True, main_process=True, resume=False)
    assert not (tmp_path / "tensorboard").exists()
    open_tracker(tmp_path, enabled=False, main_process=True, resume=False).log_epoch({"global_step": 0})


def test_the_tensorboard_flag_sets_the_config_key() -> None:
    from retrieval.cli.commands.train_commands import train
    from retrieval.cli.options.config_options import config_layer

    assert config_layer(train, {"tensorboard": True}) == {"trainer": {"tensorboard": True}}
    assert config_layer(train, {"tensorboard": None}) == {}  # unset: a config file's value stays
    on = build_config([("file", {"trainer": {"tensorboard": True}})])
    assert on.trainer.tensorboard and on.config_hash() == build_config([]).config_hash()  # not a model setting
