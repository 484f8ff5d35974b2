"""The visual concepts (classes) of the synthetic dataset: shape x colour x texture.

Classes are drawn from the full product with a seeded shuffle, so any prefix of the class
list - and each half of the sorted-class split - mixes all attributes: a model trained on
the first half meets unseen combinations (and unseen attribute values) in the second.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.synth.shapes import SHAPES
from retrieval.indexing.data.synth.textures import TEXTURES

#: Colour name -> hue in degrees; hues are at least 28 degrees apart.
COLOURS: dict[str, float] = {
    "red": 0,
    "orange": 28,
    "yellow": 55,
    "lime": 90,
    "green": 130,
    "cyan": 180,
    "azure": 210,
    "blue": 240,
    "purple": 275,
    "magenta": 312,
}


@dataclass(frozen=True)
class Concept:
    shape: str
    colour: str
    texture: str

    @property
    def name(self) -> str:
        return f"{self.shape}-{self.colour}-{self.texture}"


def all_concepts() -> list[Concept]:
    """Every shape x colour x texture combination, in a fixed order."""
    return [Concept(*combo) for combo in itertools.product(SHAPES, COLOURS, TEXTURES)]


def choose_concepts(classes: int, seed: int) -> list[Concept]:
    """``classes`` distinct concepts picked by a seeded shuffle of :func:`all_concepts`."""
    concepts = all_concepts()
    if not 1 <= classes <= len(concepts):
        raise DataError(
            f"classes must be between 1 and {len(concepts)} (the number of distinct "
            f"shape x colour x texture concepts), got {classes}"
        )
    order = np.random.default_rng([seed, 0x5EED]).permutation(len(concepts))
    return [concepts[index] for index in order[:classes]]


def class_folder_name(index: int, concept: Concept, classes: int) -> str:
    """``c007-star-red-stripes``: the zero-padded index first, so sorted order = shuffled order."""
    width = max(3, len(str(classes - 1)))
    return f"c{index:0{width}d}-{concept.name}"
