"""A torch ``Dataset`` over ``ImageRecord`` lists that survives images going bad mid-epoch.

Before training, the trainer runs ``scan_images`` and drops or refuses unreadable images
(``data.on_bad_image``). A file can still vanish or be overwritten while an epoch runs;
then this dataset serves the next readable image of the same class instead (in a fixed
cyclic order over the class, so the substitution is deterministic), logs a warning once
and remembers the path in ``bad_paths``. The "bad" flags live in a shared-memory tensor,
so flags set inside data-loader worker processes are visible to the main process and to
the other workers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.records import ImageRecord
from retrieval.training.data_pipeline.transforms import ImageTransform

logger = logging.getLogger(__name__)
_BLANK_SIZE = (8, 8)  # stands in for an unreadable eval image; the item is dropped afterwards


def label_index(records: Sequence[ImageRecord]) -> dict[str, int]:
    """Map each distinct label to 0..K-1 in sorted label order (stable across runs)."""
    return {label: i for i, label in enumerate(sorted({record.label for record in records}))}


def record_label_indices(records: Sequence[ImageRecord], label_to_index: Mapping[str, int]) -> list[int]:
    """The label index of every record; a label missing from the mapping is a ``DataError``."""
    missing = sorted({r.label for r in records} - set(label_to_index))
    if missing:
        shown = ", ".join(repr(label) for label in missing[:5])
        raise DataError(
            f"{len(missing)} record labels ({shown}) are not in the label index of "
            f"{len(label_to_index)} classes; build the index from the same records"
        )
    return [label_to_index[record.label] for record in records]


class ImageRecordDataset(Dataset):
    """``dataset[i] -> (image tensor, label index, i)``.

    ``i`` is always the requested index (so evaluation can map outputs back to records).
    An image found unreadable during iteration is marked bad (``bad_mask``). Training
    (``substitute=True``) then takes another image of the same class, so a batch keeps its
    shape; evaluation (``substitute=False``) gets blank pixels for it and must drop the item
    (``bad_mask``), since a duplicated image would inflate the metrics.
    """

    def __init__(
        self,
        records: Sequence[ImageRecord],
        label_to_index: Mapping[str, int],
        transform: ImageTransform,
        *,
        substitute: bool = True,
    ) -> None:
        self.records = list(records)
        self.substitute = substitute
        self.labels = record_label_indices(self.records, label_to_index)
        self.transform = transform
        self._class_members = _members_by_label(self.labels)
        self._position = {i: pos for members in self._class_members.values() for pos, i in enumerate(members)}
        self._bad = torch.zeros(len(self.records), dtype=torch.bool).share_memory_()

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, int]:
        label = self.labels[index]
        for candidate in self._candidates(index):
            try:
                image = open_rgb(self.records[candidate].path)
            except DataError as error:
                self._mark_bad(candidate, error)
                if not self.substitute:
                    return self.transform(Image.new("RGB", _BLANK_SIZE)), label, index
                continue
            return self.transform(image), label, index
        raise DataError(
            f"all {len(self._class_members[label])} images of class "
            f"{self.records[index].label!r} are unreadable now (e.g. {self.records[index].path}); "
            "fix or remove these files and restart"
        )

    def bad_mask(self) -> np.ndarray:
        """(N,) bool: items found unreadable during iteration (in any worker)."""
        return self._bad.numpy().copy()

    @property
    def bad_paths(self) -> list[Path]:
        """Paths found unreadable during iteration (in any worker), in dataset order."""
        return [self.records[i].path for i in torch.nonzero(self._bad).flatten().tolist()]

    def _candidates(self, index: int) -> Iterator[int]:
        """``index`` first, then the rest of its class in cyclic order, known-bad ones skipped."""
        yield index
        members = self._class_members[self.labels[index]]
        start = self._position[index]
        for offset in range(1, len(members)):
            candidate = members[(start + offset) % len(members)]
            if not bool(self._bad[candidate]):
                yield candidate

    def _mark_bad(self, index: int, error: DataError) -> None:
        if not bool(self._bad[index]):
            self._bad[index] = True
            action = "substituting another image of the same class" if self.substitute else "leaving it out"
            logger.warning("%s; %s", error, action)


def _members_by_label(labels: Sequence[int]) -> dict[int, list[int]]:
    members: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        members.setdefault(label, []).append(i)
    return members
