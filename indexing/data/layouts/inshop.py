"""DeepFashion In-Shop Clothes Retrieval with its ``list_eval_partition.txt`` protocol.

Line 1 is the image count, line 2 the column names, then ``image_name item_id
evaluation_status`` rows with status ``train``, ``query`` or ``gallery``. Query and gallery
images form the test split: queries search the gallery only (``is_query``/``is_gallery``).
The list may sit in the root or ``root/Eval``; image names (``img/...``) resolve against
the root, ``root/Img`` or the list's folder, whichever holds the first image.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.layouts.layout_files import parse_int, read_rows, require_files_exist, require_nonempty
from retrieval.indexing.data.records import ImageRecord

LIST_FILE = "list_eval_partition.txt"
# status -> (split, is_query, is_gallery)
STATUS = {"train": ("train", True, True), "query": ("test", True, False), "gallery": ("test", False, True)}


def find_inshop_list(path: Path) -> Path | None:
    for candidate in (path / LIST_FILE, path / "Eval" / LIST_FILE):
        if candidate.is_file():
            return candidate
    return None


def load_inshop(path: Path) -> list[ImageRecord]:
    root = Path(path).absolute()
    list_file = find_inshop_list(root)
    if list_file is None:
        raise DataError(f"{root} is not In-Shop: it needs {LIST_FILE} (or Eval/{LIST_FILE})")
    rows = read_rows(list_file, 3, skip=2)
    _check_count(list_file, len(rows))
    image_root = _image_root(root, list_file, rows[0][0] if rows else "")
    records = [_record(image_root, name, item, status, list_file) for name, item, status in rows]
    require_nonempty(records, list_file)
    require_files_exist(records, list_file)
    return records


def _check_count(list_file: Path, rows: int) -> None:
    first_line = list_file.read_text(encoding="utf-8").split("\n", 1)[0].strip()
    declared = parse_int(first_line, list_file, "the image count on line 1")
    if declared != rows:
        raise DataError(f"{list_file} declares {declared} images on line 1 but lists {rows}; the file looks truncated")


def _image_root(root: Path, list_file: Path, first_name: str) -> Path:
    candidates = (root, root / "Img", list_file.parent)
    return next((folder for folder in candidates if (folder / first_name).is_file()), root)


def _record(image_root: Path, name: str, item: str, status: str, list_file: Path) -> ImageRecord:
    if status not in STATUS:
        raise DataError(f"{list_file}: evaluation_status {status!r} of {name} must be train, query or gallery")
    split, is_query, is_gallery = STATUS[status]
    return ImageRecord(
        path=image_root / name,
        label=item,
        split=split,
        is_query=is_query,
        is_gallery=is_gallery,
        metadata={"evaluation_status": status},
    )
