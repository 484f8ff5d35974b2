"""Where images added through ``POST /items`` live: ``INDEX_DIR/uploads/<sha256>.<format>``.

Files are named by content, so the same image uploaded twice is stored once, and each
file is written atomically, so a crash never leaves a half-written image behind.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from PIL import Image

from retrieval.indexing.common.artifact_names import UPLOADS_SUBDIR
from retrieval.indexing.common.atomic_write import atomic_write_bytes
from retrieval.indexing.common.errors import IndexNotWritableError
from retrieval.indexing.store.shared.store_protocol import Store

__all__ = ["UPLOADS_SUBDIR", "discard_unused_uploads", "image_suffix", "is_upload", "store_upload", "upload_path"]


def image_suffix(data: bytes) -> str:
    """``.jpeg``, ``.png``, ... from the file header (the bytes already decoded, so this cannot fail)."""
    with Image.open(io.BytesIO(data)) as image:
        return "." + (image.format or "img").lower()


def upload_path(index_dir: Path, data: bytes) -> Path:
    return Path(index_dir) / UPLOADS_SUBDIR / (hashlib.sha256(data).hexdigest() + image_suffix(data))


def is_upload(index_dir: Path, path: str | Path) -> bool:
    """Whether ``path`` is a file the service stored (and so may delete with its last item)."""
    return Path(path).parent == Path(index_dir) / UPLOADS_SUBDIR


def discard_unused_uploads(index_dir: Path, paths: list[Path], in_use: set[str]) -> None:
    """Delete stored uploads that no item points to any more (after a DELETE or a failed add)."""
    for path in paths:
        if is_upload(index_dir, path) and str(path) not in in_use:
            path.unlink(missing_ok=True)


def discard_item_upload(index_dir: Path, store: Store, path: str) -> None:
    """Delete the stored upload of an item just removed or replaced, unless another item points to it."""
    discard_unused_uploads(index_dir, [Path(path)], store.paths_in_use([path]))


def store_upload(index_dir: Path, data: bytes) -> Path:
    """Write ``data`` under ``index_dir/uploads`` and return its path; IndexNotWritableError if it cannot."""
    target = upload_path(index_dir, data)
    if target.is_file():
        return target
    try:
        atomic_write_bytes(target, data)
    except OSError as error:
        raise IndexNotWritableError(
            f"cannot store the uploaded image under {target.parent} ({error.strerror}); "
            "mount the index directory writable to add items"
        ) from None
    return target


@contextmanager
def stored_uploads(index_dir: Path, store: Store, images: Sequence[bytes]) -> Iterator[list[Path]]:
    """Store the uploaded ``images`` of an add (``store_upload``) and yield their paths; when the add in the
    block fails, the files it created are deleted again unless an item points to them."""
    new = [path for data in images if not (path := upload_path(index_dir, data)).is_file()]
    paths = [store_upload(index_dir, data) for data in images]
    try:
        yield paths
    except BaseException:
        discard_unused_uploads(index_dir, new, store.paths_in_use([str(path) for path in new]))
        raise
