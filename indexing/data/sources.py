"""Turn a dataset path into ImageRecords, recognising its layout from the files it holds.

Layouts are tried in the order of :data:`LAYOUTS`: the official benchmark layouts first
(their list files are unambiguous), then a CSV manifest, then a plain ImageFolder tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.registry import Registry
from retrieval.indexing.data.layouts.cars196 import find_cars_annotations, load_cars196
from retrieval.indexing.data.layouts.csv_manifest import find_manifest, load_csv_manifest
from retrieval.indexing.data.layouts.cub import find_cub_root, load_cub
from retrieval.indexing.data.layouts.imagefolder import (
    IMAGE_EXTENSIONS,
    is_image_file,
    load_imagefolder,
    looks_like_imagefolder,
)
from retrieval.indexing.data.layouts.inshop import find_inshop_list, load_inshop
from retrieval.indexing.data.layouts.sop import find_sop_root, load_sop
from retrieval.indexing.data.records import ImageRecord


@dataclass(frozen=True)
class Layout:
    """A dataset layout: how to recognise it and how to read it."""

    name: str
    looks_for: str
    matches: Callable[[Path], bool]
    load: Callable[[Path], list[ImageRecord]]


def _load_manifest(path: Path) -> list[ImageRecord]:
    manifest = find_manifest(path)
    if manifest is None:
        raise DataError(f"{path} is neither a .csv file nor a folder with manifest.csv")
    return load_csv_manifest(manifest)


def _is_dir(path: Path) -> bool:
    return path.is_dir()


LAYOUTS: Registry[Layout] = Registry("dataset layout", "layouts", ordered=True, error=DataError)
for _layout in (
    Layout(
        "CUB-200-2011",
        "images.txt + image_class_labels.txt + classes.txt (or CUB_200_2011/...)",
        lambda p: _is_dir(p) and find_cub_root(p) is not None,
        load_cub,
    ),
    Layout("Cars196", "cars_annos.mat", lambda p: _is_dir(p) and find_cars_annotations(p) is not None, load_cars196),
    Layout(
        "Stanford Online Products",
        "Ebay_train.txt + Ebay_test.txt",
        lambda p: _is_dir(p) and find_sop_root(p) is not None,
        load_sop,
    ),
    Layout(
        "In-Shop",
        "list_eval_partition.txt (or Eval/list_eval_partition.txt)",
        lambda p: _is_dir(p) and find_inshop_list(p) is not None,
        load_inshop,
    ),
    Layout(
        "CSV manifest",
        "a .csv file, or a folder with manifest.csv",
        lambda p: find_manifest(p) is not None,
        _load_manifest,
    ),
    Layout("ImageFolder", "<class>/<image> sub-folders", looks_like_imagefolder, load_imagefolder),
):
    LAYOUTS.register(_layout.name, _layout)


def detect_layout(path: Path) -> Layout:
    """The first layout in :data:`LAYOUTS` that ``path`` matches, or a DataError listing them all."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f"dataset path {path} does not exist")
    for layout in LAYOUTS.entries():
        if layout.matches(path):
            return layout
    if path.is_dir() and not any(is_image_file(found) for found in path.rglob("*")):
        raise DataError(
            f"no images found in {path} (nor in its sub-folders); put each class's images in a folder of its own, "
            f"{path}/<class>/<image> ({', '.join(sorted(IMAGE_EXTENSIONS))})"
        )
    if path.is_dir() and any(is_image_file(found) for found in path.iterdir()):
        raise DataError(
            f"the images in {path} sit directly in it, with no class folders; move each class's images into a "
            f"folder of its own, {path}/<class>/<image>, or list them in a CSV manifest (docs/data.md)"
        )
    known = "; ".join(f"{layout.name} ({layout.looks_for})" for layout in LAYOUTS.entries())
    raise DataError(f"{path} matches no known dataset layout; looked for: {known}")


def describe_layout(path: Path) -> str:
    """The human name of the layout :func:`load_records` would use for ``path``."""
    return detect_layout(path).name


def layout_by_name(name: str) -> Layout:
    """The layout called ``name`` (case-insensitive), or a DataError listing the known names."""
    canonical = {known.lower(): known for known in LAYOUTS.names()}
    return LAYOUTS.get(canonical.get(name.strip().lower(), name))


def load_records(path: Path, layout: str | None = None) -> list[ImageRecord]:
    """All images of the dataset at ``path`` in the source's order.

    The layout is auto-detected unless ``layout`` names one of :data:`LAYOUTS`.
    """
    path = Path(path).expanduser()
    if layout is None:
        return detect_layout(path).load(path)
    chosen = layout_by_name(layout)
    if not chosen.matches(path):
        raise DataError(f"{path} is not a {chosen.name} dataset: it needs {chosen.looks_for}")
    return chosen.load(path)
