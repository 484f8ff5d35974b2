"""A deterministic cap on the images of each class (``data.max_images_per_class``), for quick runs.

Each class keeps the ``max_per_class`` images whose ``sha1(label/file name)`` sorts first: the
same images on every machine and wherever the dataset lives, independent of the other classes
and of the order the records came in, and not biased to the first files of a folder. Applied
before splitting, so it caps every split alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord


def cap_images_per_class(records: Sequence[ImageRecord], max_per_class: int) -> list[ImageRecord]:
    """At most ``max_per_class`` records of each label, chosen by ``subsample_key``; order kept."""
    if max_per_class < 1:
        raise DataError(f"max_images_per_class must be at least 1, got {max_per_class}")
    by_label: dict[str, list[ImageRecord]] = {}
    for record in records:
        by_label.setdefault(record.label, []).append(record)
    kept = {id(r) for group in by_label.values() for r in sorted(group, key=subsample_key)[:max_per_class]}
    return [record for record in records if id(record) in kept]


def subsample_key(record: ImageRecord) -> tuple[str, str]:
    """Hash of label and file name (stable across machines), then the full path to break ties."""
    digest = hashlib.sha1(f"{record.label}/{record.path.name}".encode()).hexdigest()
    return digest, str(record.path)
