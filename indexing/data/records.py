"""The one record type every data source yields and every stage consumes.

Training wraps records in a torch ``Dataset``; indexing embeds them; the SQLite item
table stores them. Keeping it torch-free lets the serving image read datasets too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ImageRecord:
    """One labelled image of a dataset.

    ``split`` is the source's own split when it has one (``"train"``/``"test"`` for CUB,
    Cars196, SOP, In-Shop, or a CSV ``split`` column) and ``None`` otherwise, in which
    case the class-disjoint split rule decides. ``is_query``/``is_gallery`` matter only
    for protocols with separate query and gallery sets (In-Shop); both default to True,
    meaning "query = gallery, self excluded".
    """

    path: Path
    label: str
    split: str | None = None
    is_query: bool = True
    is_gallery: bool = True
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def is_blank_label(label: object) -> bool:
    """True for a label that is empty or only white space: it would silently form its own class.
    The one rule for the index builder, ``index add`` and ``POST /items``."""
    return not str(label).strip()
