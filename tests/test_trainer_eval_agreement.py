"""The trainer's test metrics equal ``retrieval eval`` of the exported model on the same split.

The data is an In-Shop-like replica: a CSV manifest whose test items are query only, gallery only
or both, and one test image breaks after the pre-training scan (found only by the test loader).
Both paths must apply the same protocol and leave the broken image out, counted.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.eval.evaluation import evaluate_model
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import build_config
from retrieval.training.export.run_export import export_run
from retrieval.training.run.fitting.trainer import Trainer


def write_inshop_like_manifest(images: Path, out: Path) -> Path:
    """Every class's images cycle through query-only, gallery-only and both."""
    rows = []
    for class_dir in sorted(p for p in images.iterdir() if p.is_dir()):
        for i, path in enumerate(sorted(class_dir.glob("*.png"))):
            rows.append([str(path), class_dir.name, "", str(i % 3 != 1).lower(), str(i % 3 != 0).lower()])
    with open(out, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "label", "split", "is_query", "is_gallery"])
        writer.writerows(rows)
    return out


@pytest.mark.slow
def test_trainer_test_metrics_equal_retrieval_eval_of_the_export(synth_data: Path, tmp_path: Path) -> None:
    images = shutil.copytree(synth_data, tmp_path / "images")  # a private copy: one image gets broken below
    manifest = write_inshop_like_manifest(images, tmp_path / "manifest.csv")
    quick = {
        "data": {"path": str(manifest), "image_size": 32, "num_workers": 0, "val_fraction": 0.25},
        "model": {"backbone": "resnet18", "embedding_dim": 32},
        "trainer": {"epochs": 1, "max_steps_per_epoch": 2, "batch_size": 16, "device": "cpu", "seed": 0},
    }
    cfg = build_config([("recipe", recipe("normsoftmax")), ("test", quick)])
    run = tmp_path / "run"
    trainer = Trainer(cfg, run, progress=False)
    broken = trainer.data.splits.test[5].path  # readable at the scan, unreadable when the test loader reads it
    broken.write_bytes(b"not an image any more")
    trainer.fit()
    trained = json.loads((run / "test_metrics.json").read_text())
    assert trained["unreadable_images"] == 1

    export_run(run)
    report, _ = evaluate_model(run / "export", select_split(load_records(manifest), "test"), progress=False)
    assert report.details["unreadable_images"] == 1
    assert report.protocol == "query-gallery"
    for kind in ("float", "binary"):
        ours, theirs = trained[kind], report.metrics[kind].to_dict()
        assert ours["num_queries"] == theirs["num_queries"] > 0
        assert set(ours["recall_at_k"]) == set(theirs["recall_at_k"])
        for name in ("map_at_r", "r_precision", "precision_at_1"):
            assert ours[name] == pytest.approx(theirs[name], abs=2e-3), (kind, name)
