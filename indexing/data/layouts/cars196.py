"""Cars196 (Stanford Cars) with the standard deep-metric-learning split: classes 1-98 train, 99-196 test.

Reads ``cars_annos.mat`` (fields ``relative_im_path`` and ``class``, optional
``class_names``) with ``scipy.io.loadmat``; image paths are relative to the folder holding
the file. Labels are ``"<class id, 3 digits>.<class name>"`` so that sorted labels follow
the class ids, as for CUB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.layouts.layout_files import require_files_exist, require_nonempty
from retrieval.indexing.data.records import ImageRecord

ANNOTATION_FILE = "cars_annos.mat"
TRAIN_CLASSES = range(1, 99)


def find_cars_annotations(path: Path) -> Path | None:
    candidate = path / ANNOTATION_FILE
    return candidate if candidate.is_file() else None


def load_cars196(path: Path) -> list[ImageRecord]:
    mat_path = Path(path).absolute() / ANNOTATION_FILE
    mat = _load_mat(mat_path)
    names = _as_list(mat.get("class_names", []))
    annotations = _as_list(mat.get("annotations", []))
    records = [_record(annotation, names, mat_path) for annotation in annotations]
    require_nonempty(records, mat_path)
    require_files_exist(records, mat_path)
    return records


def _load_mat(mat_path: Path) -> dict[str, Any]:
    try:
        from scipy.io import loadmat
    except ImportError:
        raise DataError("reading Cars196's cars_annos.mat needs scipy: pip install 'scipy>=1.10'") from None
    try:
        return loadmat(mat_path, squeeze_me=True, simplify_cells=True)
    except (OSError, ValueError, TypeError, NotImplementedError) as error:
        raise DataError(f"cannot read {mat_path}: {error}") from None


def _record(annotation: Any, names: list[Any], mat_path: Path) -> ImageRecord:
    try:
        relative, class_id = str(annotation["relative_im_path"]), int(annotation["class"])
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{mat_path} annotations need the fields relative_im_path and class") from None
    if class_id < 1 or (names and class_id > len(names)):
        raise DataError(f"{mat_path} has class {class_id} outside 1..{len(names) or 'n'}")
    name = f"{class_id:03d}.{names[class_id - 1]}" if names else f"{class_id:03d}"
    return ImageRecord(
        path=mat_path.parent / relative,
        label=name,
        split="train" if class_id in TRAIN_CLASSES else "test",
        metadata={"class_id": class_id},
    )


def _as_list(value: Any) -> list[Any]:
    """``simplify_cells`` squeezes a one-element struct array to the bare struct."""
    if isinstance(value, dict) or isinstance(value, str):
        return [value]
    try:
        return list(value)
    except TypeError:
        return [value]
