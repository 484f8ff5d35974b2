"""The generations of an index directory on disk, and the switch between them.

The live generation is the directory itself (``INDEX``). A rebuild with another model is written beside
it as ``.INDEX.next``; a switch makes it live and keeps the one it replaced as ``.INDEX.previous`` (for a
rollback, which exchanges them the other way: the rolled-back generation becomes ``.INDEX.next`` again).
Both are whole index directories. A switch is two renames recorded in a journal first
(``directory_moves``), made under the index's writer lock: readers that open ``INDEX`` in between (the
service's reload) find a killed switch finished, and writers find the generation they opened replaced
(``IndexChangedError``: reload, then retry).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from retrieval.indexing.common.directory_moves import move_directories, moves_journal


def next_generation_dir(index_dir: Path) -> Path:
    """Where a rebuild with another model writes the next generation of ``index_dir``."""
    index_dir = Path(index_dir)
    return index_dir.parent / f".{index_dir.name}.next"


def previous_generation_dir(index_dir: Path) -> Path:
    """Where a switch keeps the generation it replaced (what a rollback returns to)."""
    index_dir = Path(index_dir)
    return index_dir.parent / f".{index_dir.name}.previous"


def promote(index_dir: Path, incoming: Path, outgoing: Path) -> None:
    """Make ``incoming`` the live ``index_dir`` and move the live one to ``outgoing`` (replacing what was
    there), as one journaled pair of renames. Call with the writer lock of ``index_dir`` held."""
    index_dir = Path(index_dir)
    discarded = None
    if outgoing.exists():  # an older generation: out of the way first, deleted once the switch is done
        discarded = index_dir.parent / f".{index_dir.name}.discard-{os.getpid()}"
        os.replace(outgoing, discarded)
    move_directories([(index_dir, Path(outgoing)), (Path(incoming), index_dir)], moves_journal(index_dir))
    if discarded is not None:
        shutil.rmtree(discarded, ignore_errors=True)
