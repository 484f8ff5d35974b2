"""CUB-200-2011 with the standard deep-metric-learning split: classes 1-100 train, 101-200 test.

Reads ``images.txt`` (``image_id relative_path``), ``image_class_labels.txt``
(``image_id class_id``) and ``classes.txt`` (``class_id name``) from the root or from
``root/CUB_200_2011``; images live under ``<that folder>/images``. The label is the class
folder name (``001.Black_footed_Albatross``), whose numeric prefix keeps class order = id order.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.layouts.layout_files import parse_int, read_rows, require_files_exist, require_nonempty
from retrieval.indexing.data.records import ImageRecord

LIST_FILES = ("images.txt", "image_class_labels.txt", "classes.txt")
TRAIN_CLASSES = range(1, 101)


def find_cub_root(path: Path) -> Path | None:
    """The folder holding the three CUB list files: ``path`` or ``path/CUB_200_2011``."""
    for folder in (path, path / "CUB_200_2011"):
        if folder.is_dir() and all((folder / name).is_file() for name in LIST_FILES):
            return folder
    return None


def load_cub(path: Path) -> list[ImageRecord]:
    root = find_cub_root(Path(path).absolute())
    if root is None:
        raise DataError(f"{path} is not CUB-200-2011: it needs {', '.join(LIST_FILES)}")
    images = {_id(row[0], root / "images.txt"): row[1] for row in read_rows(root / "images.txt", 2)}
    class_names = {_id(row[0], root / "classes.txt"): row[1] for row in read_rows(root / "classes.txt", 2)}
    records = []
    for image_id, class_text in read_rows(root / "image_class_labels.txt", 2):
        number, class_id = _id(image_id, root / "image_class_labels.txt"), _id(class_text, root / "classes.txt")
        if number not in images or class_id not in class_names:
            raise DataError(
                f"{root / 'image_class_labels.txt'} names image {number} or class {class_id}, "
                "which images.txt or classes.txt does not list"
            )
        records.append(
            ImageRecord(
                path=root / "images" / images[number],
                label=class_names[class_id],
                split="train" if class_id in TRAIN_CLASSES else "test",
                metadata={"image_id": number, "class_id": class_id},
            )
        )
    require_nonempty(records, root / "image_class_labels.txt")
    require_files_exist(records, root / "images.txt")
    return records


def _id(text: str, path: Path) -> int:
    return parse_int(text, path, "id")
