"""The ImageFolder layout: ``root/<class>/**/<image>``, as torchvision's ``ImageFolder``.

The class is the name of the top-level sub-folder; images may sit in nested folders below
it. Hidden files and folders (leading dot) are ignored, as are class folders without
images. Image files are recognised by extension, case-insensitively.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"})


def is_image_file(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS and not path.name.startswith(".")


def looks_like_imagefolder(root: Path) -> bool:
    """True if some class sub-folder of ``root`` holds at least one image file."""
    return root.is_dir() and any(next(_images_below(folder), None) for folder in _class_folders(root))


def load_imagefolder(root: Path) -> list[ImageRecord]:
    """One record per image; ``split`` is ``None`` (the class-disjoint split rule decides)."""
    root = Path(root).absolute()
    records = [
        ImageRecord(path=image, label=folder.name)
        for folder in _class_folders(root)
        for image in sorted(_images_below(folder))
    ]
    if not records:
        raise DataError(
            f"{root} has no class sub-folders with images (expected root/<class>/<image>, "
            f"extensions {', '.join(sorted(IMAGE_EXTENSIONS))})"
        )
    return records


def _class_folders(root: Path) -> list[Path]:
    return sorted(entry for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith("."))


def _images_below(folder: Path) -> Iterator[Path]:
    for directory, subdirs, files in os.walk(folder, followlinks=True):
        subdirs[:] = sorted(name for name in subdirs if not name.startswith("."))
        for name in sorted(files):
            path = Path(directory) / name
            if is_image_file(path):
                yield path
