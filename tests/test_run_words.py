"""Words that agree with the numbers: what a run prints and draws says what it did (issue 35, part 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from retrieval import train
from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import build_config
from retrieval.training.run.measures.run_summary import RunSetup, _embedding
from retrieval.training.run.measures.trained_run import FinalFit
from retrieval.training.run.outputs.curves import curves_figure

ROWS = [{"epoch": 0, "train_loss": None, "val": {"map_at_r": 0.5, "r_precision": 0.55, "precision_at_1": 0.6}}]


def test_one_epoch_is_singular() -> None:
    assert "for 1 epoch (the number" in FinalFit(1, 12, Path("sel")).sentence()
    assert "for 3 epochs (the number" in FinalFit(3, 12, Path("sel")).sentence()
    assert "kept the starting backbone" in FinalFit(0, 12, Path("sel")).sentence()


@pytest.mark.parametrize("reference", ["pretrained", "untrained"])
def test_the_curves_call_epoch_0_by_its_name(reference: str) -> None:
    figure = curves_figure(ROWS, reference=reference)
    assert figure.axes[1].get_xlabel() == f"epoch (0 = the {reference} backbone)"


def test_the_header_gives_the_size_the_model_will_have() -> None:
    setup = RunSetup(Path("r"), torch.device("cpu"), None, "balanced", 1, 2048, reference_dim=1280)  # type: ignore[arg-type]
    untrained = build_config([("t", {"trainer": {"epochs": 0}, "model": {"pretrained": "imagenet"}})])
    assert _embedding(untrained, setup) == "1280-d embedding (the pretrained backbone's pooled features)"
    trained = build_config([("t", {"trainer": {"epochs": 3}})])
    assert _embedding(trained, setup) == "2048-d embedding (epoch 0, the untrained backbone: 1280-d)"


def test_the_python_api_names_its_own_keywords_for_an_existing_run(synth_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"pass resume=True to continue it or overwrite=True to replace it") as caught:
        train(synth_data, run, epochs=0, device="cpu", progress=False)
    assert "--resume" not in str(caught.value)
