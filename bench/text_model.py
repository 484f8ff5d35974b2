"""A random-weights CLIP-shaped export for the text-search benchmark: a text tower of CLIP ViT-B/32's shape
(12 pre-norm causal transformer blocks of width 512, 8 heads, 77 tokens, a 49,408-token vocabulary, the
end token's features projected to 512-d) in ``text.onnx``, a ``tokenizers`` WordLevel ``tokenizer.json`` of that
vocabulary that pads and truncates to the context, and a small image model (pooled pixels -> linear, 512-d)
in ``model.onnx``, with the ``model.json`` that names them. Its cost per text is the real tower's; its
vectors mean nothing. Stand-in until ``retrieval export`` of a CLIP backbone is wired here (issue 49).
"""

from __future__ import annotations

import datetime as dt
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, pre_tokenizers, processors
from tokenizers.models import WordLevel
from torch import nn

from retrieval.indexing.exported_model.model_manifest import ModelManifest, Preprocessing, file_sha256, manifest_json
from retrieval.indexing.exported_model.text_side import TextSide

SPECIALS = ("<pad>", "<unk>", "<start>")
"""Ids 0-2; the end token is the vocabulary's last id, the highest of each row (CLIP's end token is too)."""


@dataclass(frozen=True)
class TowerShape:
    layers: int = 12
    width: int = 512
    heads: int = 8
    context: int = 77
    vocab: int = 49_408
    dim: int = 512


QUICK_SHAPE = TowerShape(layers=2, width=64, heads=4, context=16, vocab=2_000, dim=64)


class _Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(n, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        attention = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(width // self.heads) + mask, dim=-1)
        x = x + self.out((attention @ v).transpose(1, 2).reshape(n, length, width))
        return x + self.mlp(self.norm2(x))


class TextTower(nn.Module):
    """CLIP's text transformer: token + position embeddings, causal blocks, final norm, the end token's
    features (the highest id of each row, as CLIP takes them) projected."""

    def __init__(self, shape: TowerShape) -> None:
        super().__init__()
        self.tokens = nn.Embedding(shape.vocab, shape.width)
        self.positions = nn.Parameter(torch.randn(shape.context, shape.width) * 0.01)
        self.blocks = nn.ModuleList(_Block(shape.width, shape.heads) for _ in range(shape.layers))
        self.norm = nn.LayerNorm(shape.width)
        self.projection = nn.Linear(shape.width, shape.dim, bias=False)
        self.register_buffer("mask", torch.full((shape.context, shape.context), float("-inf")).triu(1))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(input_ids) + self.positions
        for block in self.blocks:
            x = block(x, self.mask)
        ends = input_ids.argmax(dim=1)
        return self.projection(self.norm(x)[torch.arange(x.shape[0]), ends])


class _PooledImages(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.head = nn.Linear(3 * 16, dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(nn.functional.adaptive_avg_pool2d(images, 4).flatten(1))


def _export(module: nn.Module, example: torch.Tensor, path: Path, names: tuple[str, str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(),
            (example,),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=[names[0]],
            output_names=[names[1]],
            dynamic_axes={names[0]: {0: "batch"}, names[1]: {0: "batch"}},
        )


def word(number: int) -> str:
    """The vocabulary's word ``number`` (the benchmark's texts are made of them)."""
    return f"w{number}"


def _tokenizer(shape: TowerShape, path: Path) -> None:
    vocab = {token: number for number, token in enumerate(SPECIALS)}
    vocab.update({word(n): len(SPECIALS) + n for n in range(shape.vocab - len(SPECIALS) - 1)})
    vocab["<end>"] = shape.vocab - 1
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<start> $A <end>", special_tokens=[("<start>", 2), ("<end>", shape.vocab - 1)]
    )
    tokenizer.enable_truncation(max_length=shape.context)
    tokenizer.enable_padding(length=shape.context, pad_id=0, pad_token="<pad>")
    tokenizer.save(str(path))


def export_text_model(export_dir: Path, shape: TowerShape = TowerShape(), seed: int = 0) -> Path:
    """Write model.onnx, text.onnx, tokenizer.json and model.json into ``export_dir``."""
    torch.manual_seed(seed)
    export_dir.mkdir(parents=True, exist_ok=True)
    _export(_PooledImages(shape.dim), torch.zeros(2, 3, 32, 32), export_dir / "model.onnx", ("images", "embeddings"))
    ids = torch.zeros(2, shape.context, dtype=torch.int64)
    _export(TextTower(shape), ids, export_dir / "text.onnx", ("input_ids", "text_embeddings"))
    _tokenizer(shape, export_dir / "tokenizer.json")
    text = TextSide(
        onnx_sha256=file_sha256(export_dir / "text.onnx"),
        tokenizer_sha256=file_sha256(export_dir / "tokenizer.json"),
        context_length=shape.context,
        embedding_dim=shape.dim,
        logit_scale=100.0,
        source=f"bench/text_model.py random {shape}",
    )
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
