"""``model.json``'s ``text``: the text tower exported beside a CLIP or SigLIP image tower.

Written by ``retrieval export`` for a model whose image embedding is still the tower's own projected
embedding (training-free); read by the torch-free text encoder. ``text.onnx`` takes ``input_ids``
(int64, ``(n, context_length)``) and returns ``text_embeddings`` (float32, ``(n, embedding_dim)``), in the
same space as the image embeddings. ``tokenizer.json`` is a Hugging Face ``tokenizers`` file that already
lower-cases, adds the start/end tokens and pads and truncates to ``context_length``, so serving only calls
``Tokenizer.from_file(...).encode_batch``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

TEXT_ONNX_NAME = "text.onnx"
TOKENIZER_NAME = "tokenizer.json"
TEXT_TOWERS = {
    "clip_vitb32": ("ViT-B-32", "openai"),
    "clip_vitb16": ("ViT-B-16", "openai"),
    "siglip_vitb16": ("ViT-B-16-SigLIP", "webli"),
}
"""The one list of backbones with a text tower: each one's open_clip model name and pretrained tag. Their hub
weights are a whole CLIP model (image and text towers, ``training.model.text.text_towers``), and their
training-free export carries the text tower (issue 49)."""


class TextSide(BaseModel):
    model_config = ConfigDict(extra="forbid")

    onnx_file: str = TEXT_ONNX_NAME
    onnx_sha256: str
    tokenizer_file: str = TOKENIZER_NAME
    tokenizer_sha256: str
    input_name: str = "input_ids"
    output_name: str = "text_embeddings"
    context_length: int = Field(gt=0, description="tokens per text; tokenizer.json pads and truncates to it")
    embedding_dim: int = Field(gt=0, description="equals the image side's embedding_dim: one space")
    logit_scale: float = Field(description="the model's learned temperature (exp of its logit_scale parameter)")
    source: str = Field(description="where the towers come from, e.g. 'open_clip ViT-B-32 openai'")
