"""What a dataset's classes lack before anything trains or is measured, in one sentence each with the fix:
class folders with no image (ignored) and classes with a single image (no other image can retrieve it, so the
split leaves it out: it neither trains nor counts as a query, ``splits.split_records``).

``retrieval data check`` prints them, and ``retrieval train`` before torch loads (``config_checks``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from retrieval.indexing.data.layouts.imagefolder import is_image_file
from retrieval.indexing.data.records import ImageRecord

SHOWN = 5
IMAGE_FOLDER = "ImageFolder"  # the one layout whose classes are folders


def class_problems(path: Path, records: Sequence[ImageRecord], *, layout: str) -> list[str]:
    """Sentences about ``path``'s empty class folders (``layout`` "ImageFolder") and single-image classes."""
    problems = []
    if layout == IMAGE_FOLDER and (empty := _empty_class_folders(Path(path))):
        problems.append(
            f"{_count(len(empty), 'class folder')} in {path} {'holds' if len(empty) == 1 else 'hold'} no image "
            f"({_names(empty)}): {'it is' if len(empty) == 1 else 'they are'} ignored; add images or remove "
            f"{'it' if len(empty) == 1 else 'them'}"
        )
    if single := single_image_classes(records):
        it = "it" if len(single) == 1 else "them"
        problems.append(
            f"{_count(len(single), 'class')} of {path} {'has' if len(single) == 1 else 'have'} a single image "
            f"({_names(single)}): no other image can retrieve {it}, so the split leaves {it} out (neither trained "
            f"on nor counted as a query); add a second image to use {it}"
        )
    return problems


def single_image_classes(records: Sequence[ImageRecord]) -> list[str]:
    """The sorted labels of the classes that have exactly one record."""
    sizes = Counter(record.label for record in records)
    return sorted(str(label) for label, count in sizes.items() if count == 1)


def _empty_class_folders(root: Path) -> list[str]:
    """ImageFolder class folders (top-level, not hidden) with no image file below them."""
    if not root.is_dir():
        return []
    folders = sorted(entry for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith("."))
    return [folder.name for folder in folders if not any(is_image_file(found) for found in folder.rglob("*"))]


def _count(number: int, noun: str) -> str:
    plural = noun + ("es" if noun.endswith("s") else "s")
    return f"{number} {noun if number == 1 else plural}"


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f", ... ({len(names) - SHOWN} more)" if len(names) > SHOWN else "")


MIRROR_WORDS = frozenset(
    {
        "left",
        "right",
        "lh",
        "rh",
        "arrow",
        "arrows",
        "mirror",
        "mirrored",
        "text",
        "letter",
        "letters",
        "digit",
        "digits",
        "sign",
        "signs",
        "logo",
        "logos",
    }
)
"""Words in a class name that suggest the class differs from another by its mirror image."""


def mirror_sensitive_classes(labels: Iterable[str]) -> list[str]:
    """The class names that suggest handedness (``arrow_left``, ``left hand``, ``text``), sorted: the flip advice
    is for them; birds, cars or products get none."""
    words = {label: set(re.split(r"[^a-z0-9]+", label.lower())) for label in set(labels)}
    return sorted(label for label, parts in words.items() if parts & MIRROR_WORDS)
