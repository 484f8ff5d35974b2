"""Deep-metric-learning losses behind one interface, chosen by name from a registry.

``build_loss(name, num_classes=, embedding_dim=, params=, miner=, miner_params=)`` returns
an ``EmbeddingLoss``; ``available_losses()`` lists the registered ``LossSpec``s and
``available_miners()`` the miner names. See docs/losses.md for the table of losses.

Modules: ``base`` (the ``EmbeddingLoss`` interface), ``registry`` (names -> builders), ``params`` (user
parameters over a spec's defaults), ``miners`` (the miner registry), ``pml_adapter`` (a
pytorch-metric-learning loss as an ``EmbeddingLoss``), ``pair_losses`` and ``proxy_losses`` (the two
families' builders, registered with their rows of ``loss_table.yaml``: descriptions, papers' defaults, search ranges), and the losses written here in pml's interface:
``native.normalized_softmax``, ``native.npairs``, ``native.proxy_triplet``, ``native.prototypical``, ``native.facility_location`` and
``native.group_loss``.
"""

from retrieval.training.losses.base import EmbeddingLoss, Sampler
from retrieval.training.losses.miners import MinerSpec, available_miners, build_miner, get_miner_spec, register_miner
from retrieval.training.losses.native.normalized_softmax import NormalizedSoftmaxLoss
from retrieval.training.losses.pml_adapter import PmlPairLoss, PmlProxyLoss
from retrieval.training.losses.registry import LossSpec, available_losses, build_loss, get_loss_spec, register_loss

# importing these registers the built-in losses
from retrieval.training.losses import pair_losses, proxy_losses  # noqa: E402,F401  isort: skip

__all__ = [
    "EmbeddingLoss",
    "LossSpec",
    "MinerSpec",
    "NormalizedSoftmaxLoss",
    "PmlPairLoss",
    "PmlProxyLoss",
    "Sampler",
    "available_losses",
    "available_miners",
    "build_loss",
    "build_miner",
    "get_loss_spec",
    "get_miner_spec",
    "register_loss",
    "register_miner",
]
