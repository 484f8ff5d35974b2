"""The ImageFolder layout: ``root/<class>/**/<image>``, as torchvision's ``ImageFolder``.

The class is the name of the top-level sub-folder; images may sit in nested folders below
it. Hidden files and folders (leading dot) are ignored, as are class folders without
images. Image files are recognised by extension, case-insensitively. Symbolic links to folders are followed,
but each real folder and each real file is read once: a link that leads back into a folder already walked (a
loop, e.g. ``cls/up -> ..``) is skipped with a warning naming it, and a file reached again by another link is
not indexed twice.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"})


def is_image_file(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS and not path.name.startswith(".")


def looks_like_imagefolder(root: Path) -> bool:
    """True if some class sub-folder of ``root`` holds at least one image file."""
    return root.is_dir() and any(next(_images_below(folder), None) for folder in _class_folders(root))


def load_imagefolder(root: Path) -> list[ImageRecord]:
    """One record per image; ``split`` is ``None`` (the class-disjoint split rule decides)."""
    root = Path(root).absolute()
    walk = _Walk()
    records = [
        ImageRecord(path=image, label=folder.name)
        for folder in _class_folders(root)
        for image in sorted(_images_below(folder, walk))
    ]
    walk.warn(root)
    if not records:
        raise DataError(
            f"{root} has no class sub-folders with images (expected root/<class>/<image>, "
            f"extensions {', '.join(sorted(IMAGE_EXTENSIONS))})"
        )
    return records


def _class_folders(root: Path) -> list[Path]:
    return sorted(entry for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith("."))


class _Walk:
    """The real folders and files one load has read, and the links it skipped because they led back."""

    def __init__(self) -> None:
        self.folders: set[str] = set()
        self.files: set[str] = set()
        self.loops: list[tuple[Path, str]] = []
        self.repeated_files = 0

    def enter(self, folder: Path) -> bool:
        """True the first time a real folder is reached; a later link to it is remembered as a loop."""
        real = os.path.realpath(folder)
        if real in self.folders:
            self.loops.append((folder, real))
            return False
        self.folders.add(real)
        return True

    def first_time(self, path: Path) -> bool:
        real = os.path.realpath(path)
        if real in self.files:
            self.repeated_files += 1
            return False
        self.files.add(real)
        return True

    def warn(self, root: Path) -> None:
        for link, real in self.loops[:10]:
            log.warning("skipped %s: a link to %s, a folder already read (a symlink loop or a second link)", link, real)
        if len(self.loops) > 10:
            log.warning("skipped %d more links to folders already read under %s", len(self.loops) - 10, root)
        if self.repeated_files:
            log.warning("%d image files under %s reached again through links were read once", self.repeated_files, root)


def _images_below(folder: Path, walk: _Walk | None = None) -> Iterator[Path]:
    walk = walk or _Walk()
    if not walk.enter(folder):
        return
    for directory, subdirs, files in os.walk(folder, followlinks=True):
        subdirs[:] = sorted(name for name in subdirs if not name.startswith(".") and walk.enter(Path(directory) / name))
        for name in sorted(files):
            path = Path(directory) / name
            if is_image_file(path) and walk.first_time(path):
                yield path
