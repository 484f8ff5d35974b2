"""What makes a CLIP or SigLIP image trunk's tokens the tower's own embedding (open_clip's ``encode_image``).

timm reads open_clip's file into the trunk (``vit_trunks.fit_state_dict``, timm's ``checkpoint_filter_fn``)
and turns a CLIP tower's projection ``visual.proj`` into ``head.weight``: the class token after the final norm
times it is ``encode_image``. SigLIP's tower has no projection: its embedding is the attention-pool head
(``visual.trunk.attn_pool``, timm's ``global_pool="map"``) over the tokens after the final norm, read into a
``MapPooling`` (tests/test_text_export.py and tests/test_siglip_text.py hold them equal).
"""

from __future__ import annotations

import torch
from torch import nn

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.hub_access import HubAccess
from retrieval.training.config.known_names import TOWER_POOLING
from retrieval.training.model.embedding_model import build_pooling
from retrieval.training.model.hub_weights import hub_weights_file
from retrieval.training.model.token_pooling import MapPooling
from retrieval.training.model.trunks.imagenet_weights import read_weights
from retrieval.training.model.trunks.vit_trunks import fit_state_dict

_ATTENTION_POOL = "attn_pool."


def tower_pooling_mode(backbone: str) -> str:
    """``model.pooling`` of ``backbone``'s tower embedding: ``map`` (SigLIP) or ``cls`` (CLIP)."""
    return TOWER_POOLING.get(backbone, "cls")


def tower_head(backbone: str, trunk: nn.Module, access: HubAccess) -> tuple[nn.Module, nn.Module]:
    """(pooling, head) that make ``trunk``'s tokens ``backbone``'s tower embedding, from its hub file: SigLIP's
    attention pool and no head, or CLIP's class token and projection."""
    fitted = fit_state_dict(read_weights(hub_weights_file(backbone, access)), trunk)
    if tower_pooling_mode(backbone) == "map":
        return _attention_pool(backbone, trunk, fitted), nn.Identity()
    return build_pooling(trunk, "cls"), _projection(backbone, fitted)


def _attention_pool(backbone: str, trunk: nn.Module, fitted: dict[str, torch.Tensor]) -> MapPooling:
    pool = MapPooling(trunk)
    state = {name[len(_ATTENTION_POOL) :]: value for name, value in fitted.items() if name.startswith(_ATTENTION_POOL)}
    try:
        pool.attn_pool.load_state_dict(state)
    except RuntimeError as error:
        first = str(error).strip().splitlines()[0]
        raise ConfigError(
            f"the {backbone} weights have no attention-pool head that fits (visual.trunk.attn_pool): {first}"
        ) from None
    return pool


def _projection(backbone: str, fitted: dict[str, torch.Tensor]) -> nn.Linear:
    """The image tower's projection (width -> D, zero bias), as timm converts it for the trunk."""
    if "head.weight" not in fitted:
        raise ConfigError(f"the {backbone} weights have no image projection (visual.proj): not a CLIP model file")
    weight = fitted["head.weight"]
    projection = nn.Linear(weight.shape[1], weight.shape[0])
    with torch.no_grad():
        projection.weight.copy_(weight)
        projection.bias.zero_()
    return projection
