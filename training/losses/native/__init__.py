"""The losses written here in pytorch-metric-learning's interface
(registered in ``proxy_losses`` and ``pair_losses``): ``normalized_softmax``, ``npairs``, ``proxy_triplet``,
``prototypical``, ``facility_location`` and ``group_loss``.
"""
