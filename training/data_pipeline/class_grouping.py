"""DREML's random class grouping: each ensemble member learns a coarser, different partition.

Xuan et al., "Deep Randomized Ensembles for Metric Learning" (ECCV 2018) train every member on
the training classes randomly grouped into D meta-classes; images of classes in the same group
count as the same class for that member's loss. Independent groupings make the members' errors
differ, and the concatenation of their embeddings separates the true classes again. Here the
grouping is a seeded permutation of the sorted class names dealt round-robin into D groups, so
every meta-class gets ``C // D`` or ``C // D + 1`` classes and none is empty. Only training
labels are grouped; validation and test always use the true classes.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from retrieval.indexing.common.errors import ConfigError


def group_classes(classes: Iterable[str], meta_classes: int, seed: int) -> dict[str, int]:
    """Map each class name to a meta-class in ``0..meta_classes-1`` (deterministic in ``seed``)."""
    names = sorted(set(classes))
    if not 2 <= meta_classes <= len(names):
        raise ConfigError(
            f"data.meta_classes (--meta-classes) is {meta_classes} but the training split has {len(names)} "
            f"classes (after the validation classes are held out); use a value from 2 to {len(names)}"
        )
    order = np.random.default_rng(seed).permutation(len(names))
    return {names[index]: position % meta_classes for position, index in enumerate(order)}
