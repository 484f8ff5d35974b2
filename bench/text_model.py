"""A random-weights CLIP export for the text-search benchmark: the text side exactly as ``retrieval export``
writes it (``training.export.text_export.write_text_side``: open_clip's text tower of CLIP ViT-B/32's shape,
12 causal blocks of width 512, 77 tokens, cut at the batch's last end token, and CLIP's own tokenizer.json),
and a small image model (pooled pixels -> linear, 512-d) in ``model.onnx``, with the ``model.json`` that
names them. Its cost per text is the real tower's; its vectors mean nothing (random weights).
"""

from __future__ import annotations

import datetime as dt
import warnings
from dataclasses import dataclass
from pathlib import Path

import open_clip
import torch
from open_clip import factory
from torch import nn

from retrieval.indexing.exported_model.model_manifest import ModelManifest, Preprocessing, file_sha256, manifest_json
from retrieval.training.export.text_export import write_text_side


@dataclass(frozen=True)
class TowerShape:
    name: str = "ViT-B-32"  # an open_clip model name
    dim: int = 512


QUICK_SHAPE = TowerShape(name="bench-tiny-clip", dim=32)
_QUICK_CONFIG = {  # the same graph at toy size
    "embed_dim": 32,
    "quick_gelu": True,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 2},
}


class _PooledImages(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.head = nn.Linear(3 * 16, dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(nn.functional.adaptive_avg_pool2d(images, 4).flatten(1))


def _export_images(module: nn.Module, path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(),
            (torch.zeros(2, 3, 32, 32),),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=["images"],
            output_names=["embeddings"],
            dynamic_axes={"images": {0: "batch"}, "embeddings": {0: "batch"}},
        )


WORDS = ("red", "blue", "small", "old", "car", "truck", "bird", "branch", "photo", "sea", "parked", "white")


def word(number: int) -> str:
    """The benchmark's word ``number`` (its texts are made of them)."""
    return WORDS[number % len(WORDS)]


def export_text_model(export_dir: Path, shape: TowerShape = TowerShape(), seed: int = 0) -> Path:
    """Write model.onnx, text.onnx, tokenizer.json and model.json into ``export_dir``."""
    factory._MODEL_CONFIGS.setdefault(QUICK_SHAPE.name, _QUICK_CONFIG)
    torch.manual_seed(seed)
    export_dir.mkdir(parents=True, exist_ok=True)
    clip = open_clip.create_model(shape.name, pretrained=None, force_quick_gelu=True).eval()
    text = write_text_side(clip, export_dir, f"open_clip {shape.name} random (bench/text_model.py)")
    _export_images(_PooledImages(shape.dim), export_dir / "model.onnx")
    manifest = ModelManifest(
        onnx_sha256=file_sha256(export_dir / "model.onnx"),
        embedding_dim=shape.dim,
        preprocessing=Preprocessing(resize=36, crop=32),
        backbone="bench-clip-shaped",
        loss="none",
        config_hash="bench",
        text=text,
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(),
    )
    (export_dir / "model.json").write_text(manifest_json(manifest))
    return export_dir
