"""The projection that makes a CLIP image trunk's class token the tower's own embedding (``encode_image``).

timm reads open_clip's CLIP file into the trunk (``vit_trunks.fit_state_dict``, timm's ``checkpoint_filter_fn``)
and turns the tower's projection ``visual.proj`` into ``head.weight``; the class token after the final norm
times it is open_clip's ``encode_image`` (tests/test_text_export.py holds them equal).
"""

from __future__ import annotations

import torch
from torch import nn

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.hub_access import HubAccess
from retrieval.training.model.hub_weights import hub_weights_file
from retrieval.training.model.trunks.imagenet_weights import read_weights
from retrieval.training.model.trunks.vit_trunks import fit_state_dict


def tower_projection(backbone: str, trunk: nn.Module, access: HubAccess) -> nn.Linear:
    """The image tower's projection (width -> D, zero bias) from ``backbone``'s hub file, as timm converts it
    for ``trunk``."""
    fitted = fit_state_dict(read_weights(hub_weights_file(backbone, access)), trunk)
    if "head.weight" not in fitted:
        raise ConfigError(f"the {backbone} weights have no image projection (visual.proj): not a CLIP model file")
    weight = fitted["head.weight"]
    projection = nn.Linear(weight.shape[1], weight.shape[0])
    with torch.no_grad():
        projection.weight.copy_(weight)
        projection.bias.zero_()
    return projection
