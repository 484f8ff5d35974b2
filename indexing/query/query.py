"""``Query``: what a search looks for, whatever door it came through. An image (a path or a PIL image), words,
a vector made elsewhere, a vector the door already embedded (the service batches its uploads), or a stored
item named by its id or its key. ``usecases.query_vectors`` turns every kind into vectors, in one place; a
new kind (e.g. positive and negative examples) is one more constructor here and one more converter there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

QueryKind = Literal["image", "text", "vector", "embedded", "item", "key", "examples"]
"""``image``: a file or a PIL image, embedded by the model; ``text``: words, embedded by its text tower;
``vector``: made elsewhere (checked and normalised, ``model`` names its model); ``embedded``: made by the
index's own model at the door (trusted as it is); ``item``/``key``: a stored item's own vector, the item
itself left out of its hits; ``examples``: ``positive`` and ``negative`` queries of any other kind, searched
together under the strategy named by ``value`` (``indexing.examples.strategies``), none of them in the hits."""


@dataclass(frozen=True)
class Query:
    """One query: its ``kind``, its ``value`` (the image, the text, the vector, the item id or key), the
    ``name`` its hits are shown under (empty: the kind's default) and, for a ``vector``, the ``model`` that
    made it (its sha256 or a prefix; None: not checked)."""

    kind: QueryKind
    value: Any
    name: str = ""
    model: str | None = None
    positive: tuple[Query, ...] = ()
    negative: tuple[Query, ...] = ()

    @classmethod
    def image(cls, image: Any, name: str = "") -> Query:
        return cls("image", image, name)

    @classmethod
    def text(cls, text: str) -> Query:
        return cls("text", text, text)

    @classmethod
    def vector(cls, vector: Any, model: str | None = None, name: str = "") -> Query:
        return cls("vector", vector, name, model)

    @classmethod
    def embedded(cls, vector: Any, name: str = "") -> Query:
        return cls("embedded", vector, name)

    @classmethod
    def item(cls, item_id: int) -> Query:
        return cls("item", int(item_id))

    @classmethod
    def key(cls, key: str) -> Query:
        return cls("key", key)

    @classmethod
    def examples(
        cls, positive: tuple[Query, ...], negative: tuple[Query, ...] = (), strategy: str = "average_vector"
    ) -> Query:
        """A search by examples: more like ``positive``, less like ``negative``."""
        return cls("examples", strategy, "examples", positive=tuple(positive), negative=tuple(negative))
