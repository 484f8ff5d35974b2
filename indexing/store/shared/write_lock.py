"""One writer per index directory, across processes: an OS file lock held for a whole update.

The lock file sits beside the directory (``.NAME.lock``), not inside it, because a rebuild
replaces the whole directory. ``flock`` locks are released by the kernel when the holder dies,
so a killed writer never leaves the index locked. Readers never take the lock: they read the
last committed generation (see ``index_store``).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_path(index_dir: Path) -> Path:
    index_dir = Path(index_dir).resolve()
    return index_dir.parent / f".{index_dir.name}.lock"


@contextmanager
def exclusive_writer(index_dir: Path) -> Iterator[None]:
    """Block until this process is the index's only writer; release on exit (or on death)."""
    path = lock_path(index_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def remove_temp_files(index_dir: Path) -> list[Path]:
    """Delete the temporary files (``.NAME.*.tmp``, see ``atomic_write``) that a writer killed mid-update
    left in the index directory. Call with the writer lock held: then no live writer owns any."""
    leftovers = sorted(Path(index_dir).glob(".*.tmp"))
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers
