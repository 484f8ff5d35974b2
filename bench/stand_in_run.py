"""A stand-in for a trained run, for the benchmarks that measure one (``bench_int8.py``, ``bench_postprocess.py``, ``bench_calibration.py``,
``bench_int8_cpu_kinds.py``) when none is given, as in ``make bench`` and in their ``--quick`` runs.

A random-weights resnet18 on a generated dataset, its BatchNorm statistics taken from its training images as
after training (activations with realistic ranges, for INT8 calibration), written as the trainer writes a
run (``config.yaml``, ``checkpoints/best.pt``). Speed figures measured on it are real; quality figures (MAP@R,
INT8's loss) mean nothing: give the benchmark a real run for those.
"""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image

from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.transforms import build_eval_transform
from retrieval.training.export.int8_export import Int8Request
from retrieval.training.export.run_export import export_run
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.run.outputs.run_dir import RunPaths, save_checkpoint, write_run_config

NOTICE = "no trained run given: a random-weights stand-in on generated data (bench/stand_in_run.py); its quality figures mean nothing"
SIZES = {"quick": (24, 8, 32), "full": (40, 20, 64)}
"""(classes, images per class, px) of the generated dataset."""


def stand_in_run(root: Path, quick: bool) -> tuple[Path, Path]:
    """(run dir, its dataset) under ``root``."""
    classes, per_class, size = SIZES["quick" if quick else "full"]
    data = root / "data"
    generate_synthetic_dataset(data, classes=classes, per_class=per_class, size=size, seed=0, progress=False)
    config = TrainConfig.model_validate(
        {"data": {"path": str(data), "image_size": size}, "model": {"backbone": "resnet18", "embedding_dim": 64}}
    )
    torch.manual_seed(0)
    model = build_embedding_model(config.model)
    transform = build_eval_transform(config.data, config.model.backbone)
    train = split_records(load_records(data)).train
    images = torch.stack([transform(Image.open(record.path).convert("RGB")) for record in train[:64]])
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.momentum = None  # the cumulative average over the forward passes
    with torch.no_grad():
        model.train()(images)
    run = root / "run"
    write_run_config(run, config)
    checkpoint = {"model": model.state_dict(), "config": config.model_dump(mode="json"), "loss_name": "none"}
    save_checkpoint(RunPaths(run).best_checkpoint, checkpoint)  # type: ignore[arg-type]
    return run, data


def stand_in_exports(root: Path, quick: bool) -> tuple[Path, Path, Path]:
    """(fp32 export, INT8 export, dataset) of a stand-in run under ``root``; the INT8 export's retrieval check
    is reported but not enforced (random weights rank by chance)."""
    run, data = stand_in_run(root, quick)
    export_run(run, root / "fp32")
    export_run(run, root / "int8", int8=Int8Request(force=True))
    return root / "fp32", root / "int8", data
