"""The text side of an export: ``text.onnx`` and ``tokenizer.json`` beside a CLIP image tower, and model.json's
``text`` (or ``text_dropped``, the sentence saying why there is none).

A run keeps its text side only where it is true (``config.hub_access.text_dropped_reason``): a training-free
CLIP or SigLIP run from the hub's weights, whose exported image model is checked here to be the tower's own embedding
(open_clip's ``encode_image`` on random images, within the export's fp32 tolerance; a run made for another
image size, or one trained before its reference was the tower's embedding, is refused the text side with a
sentence).
The text tower is exported like the image model (``onnx_graph``); CLIP's runs only the positions up to the
last end token (``text_graph``), SigLIP's (not causal, pooled at the last position) all of them. Each is
compared with open_clip's ``encode_text`` (L2-normalised) in torch on texts tokenized by the ``tokenizer.json``
it ships with (CLIP's built from open_clip's vocabulary, SigLIP's the hub's own: ``siglip_tokenizer``), as a
batch and one by one; only a graph within ``TOLERANCE`` is written, atomically.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn

from retrieval.indexing.common.atomic_write import atomic_write_bytes, atomic_write_text
from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.exported_model.text_side import TEXT_ONNX_NAME, TEXT_TOWERS, TOKENIZER_NAME, TextSide
from retrieval.training.config.hub_access import model_hub_access, text_dropped_reason
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.export.onnx_export import TOLERANCE, max_abs_diff_on
from retrieval.training.model.hub_weights import hub_side_file
from retrieval.training.model.onnx_graph import onnx_bytes
from retrieval.training.model.text.clip_tokenizer import clip_tokenizer_json
from retrieval.training.model.text.siglip_tokenizer import HUB_TOKENIZER, siglip_tokenizer
from retrieval.training.model.text.text_graph import cut_text_tower, is_causal_clip, whole_text_tower
from retrieval.training.model.text.text_towers import ImageTower, TextTower, hub_clip_model, tower_source

INPUT_NAME = "input_ids"
OUTPUT_NAME = "text_embeddings"
PARITY_TEXTS = (
    "a photo of a dog",
    "A red pickup truck, parked by the sea!",
    "",
    "café naïve 東京 — ünïcödé 😀",
    "a very long description " * 30,  # past the context length: truncated
)


def text_side_fields(config: TrainConfig, image_model: nn.Module, out_dir: Path) -> dict[str, Any]:
    """model.json's ``text`` or ``text_dropped`` for a run's export (written into ``out_dir``), or nothing
    for a backbone without a text tower."""
    backbone = config.model.backbone
    if backbone not in TEXT_TOWERS:
        return {}
    reason = text_dropped_reason(config)
    if reason is not None:
        return {"text_dropped": reason}
    access = model_hub_access(config.model)
    clip = hub_clip_model(backbone, access)
    if (mismatch := tower_mismatch(image_model, clip, config.data.image_size)) is not None:
        return {"text_dropped": mismatch}
    tokenizer_json = None
    if not is_causal_clip(clip):  # SigLIP: the hub's own tokenizer, set up as open_clip calls it
        hub_json = hub_side_file(backbone, HUB_TOKENIZER, access).read_text(encoding="utf-8")
        tokenizer_json = siglip_tokenizer(hub_json, int(clip.context_length)).to_str()  # type: ignore[arg-type]
    return {"text": write_text_side(clip, out_dir, tower_source(backbone), tokenizer_json)}


def tower_mismatch(image_model: nn.Module, clip: nn.Module, image_size: int) -> str | None:
    """Why ``image_model`` is not ``clip``'s image tower (a sentence), or None when they agree within fp32's
    export tolerance on random images."""
    native = int(clip.visual.image_size[0])  # type: ignore[union-attr, index]
    if image_size != native:
        return (
            f"the text tower is not exported: the run's images are {image_size} px and the tower was trained "
            f"at {native} px (train with --image-size {native})"
        )
    tower = ImageTower(clip).eval()
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(2, 3, image_size, image_size, generator=generator)
    with torch.no_grad():
        difference = float((image_model.eval()(images) - tower(images)).abs().max())
    if difference <= TOLERANCE["fp32"]:
        return None
    return (
        f"the text tower is not exported: the run's image model is not the image tower's own embedding (they differ "
        f"by {difference:.3g}); run `retrieval train` again with --epochs 0"
    )


def write_text_side(clip: nn.Module, out_dir: Path, source: str, tokenizer_json: str | None = None) -> TextSide:
    """``text.onnx`` and ``tokenizer.json`` (``tokenizer_json``; default CLIP's) of ``clip`` written into
    ``out_dir`` after the parity check, and their ``TextSide``."""
    context_length = int(clip.context_length)  # type: ignore[arg-type]
    tokenizer_json = tokenizer_json or clip_tokenizer_json(context_length)
    tower = TextTower(clip).eval()  # open_clip's encode_text: what the graph is checked against
    ids = torch.from_numpy(tokenized(tokenizer_json, PARITY_TEXTS))
    graph = onnx_bytes(
        cut_text_tower(clip) if is_causal_clip(clip) else whole_text_tower(clip),
        tuple(ids.shape),
        input_name=INPUT_NAME,
        output_name=OUTPUT_NAME,
        dtype=torch.int64,
        example=ids[:2],  # two short texts: the cut's length is traced as the computation it is
    )
    difference = max(  # the batch (CLIP's cut at its longest text), and each text alone (cut at its own end)
        max_abs_diff_on(tower, graph, batch, INPUT_NAME, OUTPUT_NAME) for batch in (ids, *ids.split(1))
    )
    if not difference <= TOLERANCE["fp32"]:
        raise RetrievalError(
            f"the exported text tower differs from torch by {difference:.3g} (tolerance {TOLERANCE['fp32']:g}); "
            "nothing was written, report this with the run's config.yaml"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out_dir / TEXT_ONNX_NAME, graph)
    atomic_write_text(out_dir / TOKENIZER_NAME, tokenizer_json)
    with torch.no_grad():
        embedding_dim = int(tower(ids[:1]).shape[1])
    return TextSide(
        onnx_sha256=hashlib.sha256(graph).hexdigest(),
        tokenizer_sha256=hashlib.sha256(tokenizer_json.encode()).hexdigest(),
        context_length=context_length,
        embedding_dim=embedding_dim,
        logit_scale=float(clip.logit_scale.detach().exp()),  # type: ignore[operator]
        source=source,
    )


def tokenized(tokenizer_json: str, texts: tuple[str, ...] | list[str]) -> np.ndarray:
    """The ids ``tokenizer.json`` gives ``texts`` (n, context_length), int64: what the reader feeds text.onnx."""
    return np.array([encoding.ids for encoding in Tokenizer.from_str(tokenizer_json).encode_batch(list(texts))])
