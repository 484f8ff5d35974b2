"""A tiny randomly initialised CLIP (open_clip's model, 64 wide, 2 layers, 32 px images, CLIP's real BPE vocabulary)
for tests that need a text tower without the internet: as the hub's open_clip file (``tiny_clip_bytes``), as
``clip_vitb16`` itself (``use_tiny_clip``: the backbone's trunk and open_clip model made tiny), and as a ready
text-capable export with no training run (``tiny_text_export``). Nothing is downloaded; no weights are stored."""

from __future__ import annotations

import io
from pathlib import Path

import open_clip
import pytest
import timm
import torch
from open_clip import factory
from torch import nn

from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.text_side import TEXT_TOWERS
from retrieval.training.config.hub_access import OPEN_CLIP_FILES, hub_repo
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.export.onnx_export import build_manifest, write_checked_export
from retrieval.training.export.text_export import write_text_side
from retrieval.training.model.text.text_towers import ImageTower
from retrieval.training.model.trunks.backbones import BACKBONES, CLIP_NORMALIZATION, Backbone

BACKBONE = "clip_vitb16"
IMAGE_SIZE = 32  # 2 x 2 patches of 16 px
EMBEDDING_DIM = 32
WIDTH = 64
MODEL_NAME = "retrieval-tiny-clip"
MODEL_CONFIG = {
    "embed_dim": EMBEDDING_DIM,
    "quick_gelu": True,  # as OpenAI's CLIP
    "vision_cfg": {"image_size": IMAGE_SIZE, "layers": 2, "width": WIDTH, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": WIDTH, "heads": 1, "layers": 2},
}
HUB_KEY = f"{hub_repo(BACKBONE)}/{OPEN_CLIP_FILES[1]}"  # open_clip_pytorch_model.bin, where the fake hub serves it


def seeded_open_clip(name: str, config: dict[str, object], seed: int) -> nn.Module:
    """open_clip's model ``name`` (registered with ``config``) with seeded random weights (eval mode)."""
    factory._MODEL_CONFIGS.setdefault(name, config)
    torch.manual_seed(seed)
    model = open_clip.create_model(name, pretrained=None)
    with torch.no_grad():  # LayerNorms and biases start at 1 and 0: move them, so the test sees them all
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model.eval()


def state_bytes(model: nn.Module) -> bytes:
    """``model``'s state dict as the hub's ``open_clip_pytorch_model.bin``."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def tiny_clip_model(seed: int = 0) -> nn.Module:
    """The tiny open_clip model with seeded random weights (eval mode)."""
    return seeded_open_clip(MODEL_NAME, MODEL_CONFIG, seed)


def tiny_clip_bytes(seed: int = 0) -> bytes:
    """The tiny model's state dict as the hub's ``open_clip_pytorch_model.bin``."""
    return state_bytes(tiny_clip_model(seed))


def _tiny_trunk(image_size: int | None = None) -> tuple[nn.Module, int]:
    trunk = timm.create_model(
        "vit_base_patch16_clip_quickgelu_224",
        pretrained=False,
        num_classes=0,
        global_pool="",
        embed_dim=WIDTH,
        depth=2,
        num_heads=1,
        img_size=image_size or IMAGE_SIZE,
    )
    return trunk, WIDTH


def use_tiny_clip(monkeypatch: pytest.MonkeyPatch) -> None:
    """``clip_vitb16`` made tiny for the test: its trunk, and the open_clip model its text tower is built as."""
    factory._MODEL_CONFIGS.setdefault(MODEL_NAME, MODEL_CONFIG)
    monkeypatch.setitem(TEXT_TOWERS, BACKBONE, (MODEL_NAME, "openai"))
    original = BACKBONES.get(BACKBONE)
    tiny = Backbone(_tiny_trunk, "timm_cache", CLIP_NORMALIZATION, original.timm_name, native_size=IMAGE_SIZE)
    monkeypatch.setitem(BACKBONES._entries, BACKBONE, tiny)


def tiny_text_export(out_dir: Path, seed: int = 0) -> ModelManifest:
    """A text-capable export of the tiny CLIP in ``out_dir`` (model.onnx, model.json, text.onnx,
    tokenizer.json), made without a training run: the image model is the tower's ``encode_image``."""
    clip = tiny_clip_model(seed)
    config = TrainConfig.model_validate(
        {
            "data": {"image_size": IMAGE_SIZE},
            "model": {"backbone": BACKBONE, "pretrained": "hub", "pooling": "cls", "layer_norm": False},
            "trainer": {"epochs": 0},
        }
    )
    text = write_text_side(clip, out_dir, f"open_clip {MODEL_NAME} random")
    result = write_checked_export(
        ImageTower(clip),
        IMAGE_SIZE,
        out_dir,
        fp16=False,
        manifest_for=lambda onnx, precision: build_manifest(config, {}, onnx, EMBEDDING_DIM, precision).model_copy(
            update={"text": text}
        ),
    )
    return result.manifest
