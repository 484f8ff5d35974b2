"""A random-weights resnet18 (or resnet50) embedder exported like ``retrieval export`` does, for benchmarks.

Benchmarks import it as ``from bench_models import export_resnet18`` (``python bench/x.py``
puts ``bench/`` on the path). Random weights: speed does not depend on the values.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import torch
import torchvision

from retrieval.indexing.exported_model.model_manifest import ModelManifest, Preprocessing, file_sha256, manifest_json

POOLED_DIMS = {"resnet18": 512, "resnet50": 2048}


class Resnet18Embedder(torch.nn.Module):
    """resnet18 trunk (512-d pooled features; resnet50: 2048-d), L2-normalised inside the graph."""

    def __init__(self, arch: str = "resnet18") -> None:
        super().__init__()
        self.backbone = getattr(torchvision.models, arch)(weights=None)
        self.backbone.fc = torch.nn.Identity()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(self.backbone(images), dim=1)


def export_resnet18(out_dir: Path, image_size: int = 224, arch: str = "resnet18", seed: int = 0) -> Resnet18Embedder:
    """Write ``out_dir/model.onnx`` + ``model.json`` (eval transform: shorter side to 256/224 of
    ``image_size``, centre crop ``image_size``); return the torch model that was exported. Another
    ``seed`` gives other random weights (another model, for a model upgrade)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = Resnet18Embedder(arch).eval()
    torch.onnx.export(
        model,
        (torch.zeros(2, 3, image_size, image_size),),
        str(out_dir / "model.onnx"),
        dynamo=False,
        opset_version=17,
        input_names=["images"],
        output_names=["embeddings"],
        dynamic_axes={"images": {0: "batch"}, "embeddings": {0: "batch"}},
    )
    manifest = ModelManifest(
        onnx_sha256=file_sha256(out_dir / "model.onnx"),
        embedding_dim=POOLED_DIMS[arch],
        preprocessing=Preprocessing(resize=round(image_size * 256 / 224), crop=image_size),
        backbone=arch,
        loss="none",
        config_hash="bench",
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(),
    )
    (out_dir / "model.json").write_text(manifest_json(manifest))
    return model
