"""Stanford Online Products with its own split files ``Ebay_train.txt`` / ``Ebay_test.txt``.

Each file has a header line, then ``image_id class_id super_class_id path`` rows; paths are
relative to the folder holding the files (the root or ``root/Stanford_Online_Products``).
Labels are the class id zero-padded to 5 digits, so sorted labels follow the ids.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.data.layouts.layout_files import parse_int, read_rows, require_files_exist, require_nonempty
from retrieval.indexing.data.records import ImageRecord

SPLIT_FILES = {"train": "Ebay_train.txt", "test": "Ebay_test.txt"}


def find_sop_root(path: Path) -> Path | None:
    for folder in (path, path / "Stanford_Online_Products"):
        if folder.is_dir() and all((folder / name).is_file() for name in SPLIT_FILES.values()):
            return folder
    return None


def load_sop(path: Path) -> list[ImageRecord]:
    root = find_sop_root(Path(path).absolute()) or Path(path).absolute()
    records = [record for split, name in SPLIT_FILES.items() for record in _read_split(root / name, split)]
    require_nonempty(records, root / SPLIT_FILES["train"])
    require_files_exist(records, root)
    return records


def _read_split(list_file: Path, split: str) -> list[ImageRecord]:
    records = []
    for image_id, class_id, super_class_id, relative in read_rows(list_file, 4, skip=1):
        records.append(
            ImageRecord(
                path=list_file.parent / relative,
                label=f"{parse_int(class_id, list_file, 'class_id'):05d}",
                split=split,
                metadata={
                    "image_id": parse_int(image_id, list_file, "image_id"),
                    "super_class_id": parse_int(super_class_id, list_file, "super_class_id"),
                },
            )
        )
    return records
