"""Shared fixtures of the indexing tests: a tiny random-weights ONNX model and a generated gallery.

tests/conftest.py registers this module as a pytest plugin, so tests request the fixtures by name.
Tests may import torch; ``retrieval.indexing`` may not, so the model is exported here.
"""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.model_manifest import ModelManifest, Preprocessing, file_sha256, manifest_json

TINY_DIM = 64
TINY_PREP = Preprocessing(resize=36, crop=32)
NUM_CLASSES = 6
PER_CLASS = 5


def export_tiny_model(export_dir: Path, dim: int = TINY_DIM, seed: int = 0) -> Path:
    """conv -> ReLU -> global average pool -> linear -> L2-normalise, exported like `retrieval export`."""
    import torch
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.head = nn.Linear(16 + 3, dim, bias=False)

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            pooled = torch.relu(self.conv(images)).mean(dim=(2, 3))
            pooled = pooled - pooled.mean(dim=1, keepdim=True)  # centred, so classes point apart
            colour = images.mean(dim=(2, 3))
            return nn.functional.normalize(self.head(torch.cat([pooled, colour], dim=1)), dim=1)

    torch.manual_seed(seed)
    export_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = export_dir / "model.onnx"
    dummy = torch.zeros(2, 3, TINY_PREP.crop, TINY_PREP.crop)
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated but needs no onnxscript
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            Tiny().eval(),
            (dummy,),
            str(onnx_path),
            dynamo=False,
            opset_version=17,
            input_names=["images"],
            output_names=["embeddings"],
            dynamic_axes={"images": {0: "batch"}, "embeddings": {0: "batch"}},
        )
    manifest = tiny_manifest(dim, onnx_sha256=file_sha256(onnx_path))
    (export_dir / "model.json").write_text(manifest_json(manifest))
    return export_dir


def tiny_manifest(dim: int = TINY_DIM, *, onnx_sha256: str = "0" * 64, **fields: Any) -> ModelManifest:
    """The ``model.json`` of the tiny convolutional model (``fields``: any others, e.g. a verdict)."""
    return ModelManifest(
        onnx_sha256=onnx_sha256,
        embedding_dim=dim,
        preprocessing=TINY_PREP,
        backbone="tiny-conv",
        loss="none",
        config_hash="test",
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(),
        **fields,
    )


def class_colour(index: int) -> tuple[int, int, int]:
    hues = [(220, 40, 40), (40, 200, 60), (40, 60, 220), (230, 220, 40), (200, 40, 220), (40, 220, 220)]
    return hues[index % len(hues)]


def make_image(class_index: int, item: int, size: tuple[int, int] = (48, 40)) -> Image.Image:
    """A solid class colour with a class-specific gradient and per-image noise."""
    rng = np.random.default_rng(1000 * class_index + item)
    base = np.array(class_colour(class_index), dtype=np.float32) + rng.normal(0, 20, 3)  # per-image tint
    ramp = np.linspace(0, 30 * (class_index % 3), size[0], dtype=np.float32)[None, :, None]
    pixels = base + ramp + rng.normal(0, 12, (size[1], size[0], 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def make_gallery(root: Path, num_classes: int = NUM_CLASSES, per_class: int = PER_CLASS) -> list[ImageRecord]:
    """Write an ImageFolder tree of generated JPEGs/PNGs and return its records."""
    records = []
    for class_index in range(num_classes):
        folder = root / f"class_{class_index}"
        folder.mkdir(parents=True, exist_ok=True)
        for item in range(per_class):
            path = folder / f"img_{item}.png"
            make_image(class_index, item).save(path)
            records.append(ImageRecord(path=path, label=f"class_{class_index}", metadata={"n": item}))
    return records


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_tiny_model(tmp_path_factory.mktemp("model") / "export")


@pytest.fixture(scope="session")
def gallery_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gallery")
    make_gallery(root)
    return root


@pytest.fixture()
def gallery_records(gallery_dir: Path) -> list[ImageRecord]:
    return [
        ImageRecord(path=path, label=path.parent.name, metadata={"file": path.name})
        for path in sorted(gallery_dir.glob("*/*.png"))
    ]
