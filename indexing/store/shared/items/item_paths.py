"""How ``items.sqlite`` stores an item's image path: relative to the index directory when the image is
inside it (the service's ``uploads/``), absolute otherwise (a gallery indexed from a dataset).

A relative path keeps pointing at the index's own file wherever the directory goes: a snapshot, a copy
restored elsewhere, the next generation made live. Items are read back with absolute paths (the index
directory joined in front); a path stored absolute by an older version is read as it is, and a
snapshot stores its copies relative (``relocate_paths``). An item added by its vector has no image: its
path is ``VECTOR_ITEM_PATH`` (read back inside the index directory, where no such file is), ``added_by_vector``.
"""

from __future__ import annotations

import os
import sqlite3
from functools import lru_cache
from pathlib import Path, PurePosixPath

VECTOR_ITEM_PATH = "(vector)"
"""The path of an item added by its vector (it has no image: its thumbnail and image are 404s)."""


def added_by_vector(path: str | Path) -> bool:
    """Whether an item's path (as read back) is that of an item added by its vector, which has no image file."""
    return Path(path).name == VECTOR_ITEM_PATH and not os.path.exists(path)


def stored_path(path: str | Path, root: Path) -> str:
    """``path`` as the item table of the index at ``root`` stores it."""
    absolute = os.path.abspath(path)
    for base in _bases(str(root)):
        if absolute == base or absolute.startswith(base.rstrip(os.sep) + os.sep):
            return Path(os.path.relpath(absolute, base)).as_posix()
    return str(path)


@lru_cache(maxsize=16)
def _bases(root: str) -> tuple[str, ...]:
    """The index directory as given (made absolute) and resolved: once per directory, not per item (an add
    of 1,000 items spent 0.35 s resolving it 1,000 times)."""
    return tuple(dict.fromkeys((os.path.abspath(root), str(Path(root).resolve()))))


def absolute_path(stored: str, root: Path) -> str:
    """The path an item's image has, from what the item table of the index at ``root`` holds."""
    if os.path.isabs(stored):
        return stored
    return _joined(str(root), stored)


@lru_cache(maxsize=8192)
def _joined(root: str, stored: str) -> str:
    """``root`` / ``stored`` as pathlib joins them, remembered (every item added by its vector shares one
    path; a search's hits are often the same few items): pathlib's parsing was most of reading an item."""
    return str(Path(root) / PurePosixPath(stored))


def relocate_paths(db: sqlite3.Connection, root: Path) -> int:
    """Store relative the absolute paths that point inside ``root`` (an item table copied out of the index
    at ``root``, written by an older version); how many were changed."""
    changed = 0
    for base in dict.fromkeys((os.path.abspath(root), str(Path(root).resolve()))):
        prefix = base.rstrip(os.sep) + os.sep
        cursor = db.execute(
            "UPDATE items SET path = substr(path, ?) WHERE substr(path, 1, ?) = ?",
            (len(prefix) + 1, len(prefix), prefix),
        )
        changed += cursor.rowcount
    db.commit()
    return changed
