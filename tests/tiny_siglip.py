"""A tiny randomly initialised SigLIP (open_clip's ``CustomTextCLIP`` with SigLIP's settings: a timm ViT image
tower with the attention-pool head and no projection, a non-causal text tower pooled at its last position, 64 tokens)
and a small SentencePiece-style unigram ``tokenizer.json`` built offline with ``tokenizers`` (T5's layout: ``<pad>``,
``</s>``, ``<unk>``, a metaspace pre-tokenizer, ``$A </s>``), for tests that need SigLIP's text tower without the
internet: as the hub's open_clip file and tokenizer (``tiny_siglip_bytes``, ``hub_tokenizer_json``), and as
``siglip_vitb16`` itself (``use_tiny_siglip``). Nothing is downloaded; no weights are stored."""

from __future__ import annotations

import pytest
import timm
from open_clip import factory
from timm.models import register_model
from tiny_clip import seeded_open_clip, state_bytes
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from torch import nn

from retrieval.indexing.exported_model.text_side import TEXT_TOWERS
from retrieval.training.config.hub_access import OPEN_CLIP_FILES, hub_repo
from retrieval.training.model.text.siglip_tokenizer import HUB_TOKENIZER
from retrieval.training.model.trunks.backbones import BACKBONES, Backbone, Normalization

BACKBONE = "siglip_vitb16"
IMAGE_SIZE = 32  # 2 x 2 patches of 16 px
WIDTH = 64  # SigLIP's image tower has no projection: its width is the embedding size
CONTEXT_LENGTH = 64
TIMM_NAME = "vit_base_patch16_siglip_224"
TINY_TIMM_NAME = "retrieval_tiny_siglip_vit"  # registered below: the tower open_clip builds for the tiny config
MODEL_NAME = "retrieval-tiny-siglip"
PIECES = [  # (piece, log probability) after <pad> 0, </s> 1, <unk> 2
    *[(f"▁{word}", -2.0) for word in "a photo of the red pickup truck two small birds on branch dog sea".split()],
    *[(piece, -4.0) for piece in ("▁", "ed", "ing", "s", "▁park", "▁bird", "▁pick", "up")],
    *[(letter, -8.0) for letter in "abcdefghijklmnopqrstuvwxyz0123456789"],
]
MODEL_CONFIG = {
    "embed_dim": WIDTH,
    "init_logit_bias": -10,
    "custom_text": True,
    "vision_cfg": {
        "image_size": IMAGE_SIZE,
        "timm_model_name": TINY_TIMM_NAME,
        "timm_model_pretrained": False,
        "timm_pool": "map",
        "timm_proj": "none",
    },
    "text_cfg": {
        "context_length": CONTEXT_LENGTH,
        "vocab_size": 3 + len(PIECES),
        "width": WIDTH,
        "heads": 2,
        "layers": 2,
        "no_causal_mask": True,
        "proj_bias": True,
        "pool_type": "last",
        "norm_kwargs": {"eps": 1e-6},
    },
}
WEIGHTS_KEY = f"{hub_repo(BACKBONE)}/{OPEN_CLIP_FILES[1]}"  # where the fake hub serves the tiny model
TOKENIZER_KEY = f"{hub_repo(BACKBONE)}/{HUB_TOKENIZER}"


@register_model
def retrieval_tiny_siglip_vit(pretrained: bool = False, **options: object) -> nn.Module:
    """timm's SigLIP ViT-B/16 made 64 wide and 2 deep (open_clip names timm models; this one it builds tiny)."""
    tiny = {"embed_dim": WIDTH, "depth": 2, "num_heads": 2, "img_size": IMAGE_SIZE}
    return timm.create_model(TIMM_NAME, pretrained=False, **{**tiny, **options})


def _tiny_trunk(image_size: int | None = None) -> tuple[nn.Module, int]:
    trunk = timm.create_model(TINY_TIMM_NAME, num_classes=0, global_pool="", img_size=image_size or IMAGE_SIZE)
    return trunk, WIDTH


def tiny_siglip_model(seed: int = 0) -> nn.Module:
    """The tiny open_clip SigLIP with seeded random weights (eval mode)."""
    return seeded_open_clip(MODEL_NAME, MODEL_CONFIG, seed)


def tiny_siglip_bytes(seed: int = 0) -> bytes:
    """The tiny model's state dict as the hub's ``open_clip_pytorch_model.bin``."""
    return state_bytes(tiny_siglip_model(seed))


def hub_tokenizer() -> Tokenizer:
    """A small unigram tokenizer laid out as SigLIP's hub ``tokenizer.json`` (T5's), no padding or truncation set."""
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), *PIECES]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=2))
    tokenizer.normalizer = normalizers.NFKC()  # stands in for T5's precompiled character map
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tokenizer


def hub_tokenizer_json() -> str:
    return hub_tokenizer().to_str()


def hub_files() -> dict[str, bytes]:
    """What the fake hub serves for ``siglip_vitb16``: the tiny model and the tokenizer."""
    return {WEIGHTS_KEY: tiny_siglip_bytes(), TOKENIZER_KEY: hub_tokenizer_json().encode()}


def use_tiny_siglip(monkeypatch: pytest.MonkeyPatch) -> None:
    """``siglip_vitb16`` made tiny for the test: its trunk, and the open_clip model its text tower is built as."""
    factory._MODEL_CONFIGS.setdefault(MODEL_NAME, MODEL_CONFIG)
    monkeypatch.setitem(TEXT_TOWERS, BACKBONE, (MODEL_NAME, "webli"))
    original = BACKBONES.get(BACKBONE)
    normalization = Normalization((0.5,) * 3, (0.5,) * 3)
    tiny = Backbone(_tiny_trunk, "timm_cache", normalization, original.timm_name, native_size=IMAGE_SIZE)
    monkeypatch.setitem(BACKBONES._entries, BACKBONE, tiny)
