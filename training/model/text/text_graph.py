"""The CLIP text tower as ``text.onnx`` holds it: only the positions up to the batch's last end token run.

CLIP's text transformer is causal and its embedding is the end token's (the largest id), so no position after
the end token changes it: a query of 6 words padded to 77 tokens needs about 8 positions, a tenth of the work.
``CutTextTower`` takes the ids padded to the context length (``tokenizer.json``'s output, unchanged), keeps
the positions ``arange(last end + 1)`` and runs open_clip's own modules on them (token and position embedding,
the transformer with its causal mask cut alike, final norm, the end token's projection). The cut is made in the
graph, so its length stays dynamic in ONNX; PyTorch's TorchScript exporter, though, fixes the sequence length
inside ``nn.MultiheadAttention`` (its reshapes keep the traced length), so the exported copy's attention modules
are swapped for ``ExportableAttention``: the same weights and computation (``scaled_dot_product_attention``)
with shapes the exporter keeps dynamic. ``export.text_export`` checks the graph against open_clip's
``encode_text`` on texts of several lengths. SigLIP's text tower runs every position (``whole_text_tower``).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from retrieval.training.model.text.text_towers import TextTower


class ExportableAttention(nn.Module):
    """``nn.MultiheadAttention``'s batch-first self-attention (``need_weights=False``), the same weights."""

    def __init__(self, attention: nn.MultiheadAttention) -> None:
        super().__init__()
        self.in_proj_weight, self.in_proj_bias = attention.in_proj_weight, attention.in_proj_bias
        self.out_proj, self.num_heads = attention.out_proj, attention.num_heads

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        need_weights: bool = False,
        attn_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, None]:
        q, k, v = F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (part.unflatten(-1, (self.num_heads, -1)).transpose(1, 2) for part in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.out_proj(attended.transpose(1, 2).flatten(2)), None


class CutTextTower(nn.Module):
    """ids (N, context_length) -> unit-norm text embeddings (N, D), running the positions up to the last end."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        clip = self.model
        ends = input_ids.argmax(dim=-1)
        kept = torch.arange(ends.max() + 1, device=input_ids.device)  # type: ignore[call-overload]  # a 0-d tensor: traced
        tokens = clip.token_embedding(input_ids.index_select(1, kept))  # type: ignore[operator]
        tokens = tokens + clip.positional_embedding.index_select(0, kept)  # type: ignore[operator]
        mask = clip.attn_mask.index_select(0, kept).index_select(1, kept)  # type: ignore[operator]
        tokens = clip.ln_final(clip.transformer(tokens, attn_mask=mask))  # type: ignore[operator]
        pooled = tokens[torch.arange(tokens.shape[0], device=tokens.device), ends]
        projection = clip.text_projection
        pooled = projection(pooled) if isinstance(projection, nn.Linear) else pooled @ projection
        return F.normalize(pooled, dim=-1)


def is_causal_clip(model: nn.Module) -> bool:
    """Whether ``model``'s text tower is open_clip's CLIP one: causal (a mask), pooled at the end token."""
    return (
        getattr(model, "attn_mask", None) is not None
        and getattr(model, "text_pool_type", None) == "argmax"
        and all(isinstance(getattr(b, "attn", None), nn.MultiheadAttention) for b in model.transformer.resblocks)  # type: ignore[union-attr]
    )


def cut_text_tower(model: nn.Module) -> CutTextTower:
    """``CutTextTower`` of a copy of ``model`` whose attention modules are ``ExportableAttention``."""
    return CutTextTower(_exportable_copy(model))


def whole_text_tower(model: nn.Module) -> TextTower:
    """``TextTower`` (every position) of a copy of ``model`` whose attention modules are ``ExportableAttention``:
    SigLIP's text tower, not causal and pooled at the last position (in eval mode ``nn.MultiheadAttention`` takes
    its fused fast path, ``_native_multi_head_attention``, which the exporter has no ONNX operator for)."""
    return TextTower(_exportable_copy(model))


def _exportable_copy(model: nn.Module) -> nn.Module:
    exported = copy.deepcopy(model).eval()
    text = getattr(exported, "text", exported)  # open_clip's CustomTextCLIP (SigLIP) holds its text tower apart
    for block in text.transformer.resblocks:  # type: ignore[union-attr]
        block.attn = ExportableAttention(block.attn)
    return exported
