"""The generations of an index directory on disk, and the switch between them.

The live generation is the directory itself (``INDEX``). A rebuild with another model is written beside
it as ``.INDEX.next``; a switch makes it live and keeps the one it replaced as the previous generation
``.INDEX.previous``, the one before that as ``.INDEX.previous-2`` and so on, ``keep`` of them
(``KEEP_PREVIOUS`` unless told); older ones are deleted. A rollback takes the most recent previous
generation back (the others move up one place) and keeps the rolled-back one as ``.INDEX.next``, so a
switch returns to it. All are whole index directories. A switch is renames recorded in a journal
first (``directory_moves``), the deleted generation among them, made under the index's writer lock:
readers that open ``INDEX`` in between (the service's reload) find a killed switch finished, and
writers find the generation they opened replaced (``IndexChangedError``: reload, then retry).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from retrieval.indexing.common.directory_moves import Moves, discard_dir, move_directories, moves_journal
from retrieval.indexing.common.errors import IndexFormatError
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest

KEEP_PREVIOUS = 2  # previous generations a switch keeps (each a way back: `index rollback`)
_MOST_KEPT = 100  # how far previous generations are looked for


@dataclass(frozen=True)
class Generation:
    """One generation on disk: ``role`` is ``live``, ``next`` or ``previous``/``previous-N``."""

    role: str
    path: Path
    model_sha256: str
    count: int
    updated_at: str
    problem: str = ""


def next_generation_dir(index_dir: Path) -> Path:
    """Where a rebuild with another model writes the next generation of ``index_dir``."""
    index_dir = Path(index_dir)
    return index_dir.parent / f".{index_dir.name}.next"


def previous_generation_dir(index_dir: Path, back: int = 1) -> Path:
    """Where a switch keeps the generation it replaced (``back`` 1: what a rollback returns to), or the
    one ``back`` switches ago."""
    index_dir = Path(index_dir)
    suffix = "" if back == 1 else f"-{back}"
    return index_dir.parent / f".{index_dir.name}.previous{suffix}"


def previous_generations(index_dir: Path) -> list[Path]:
    """The previous generations on disk, the most recent first."""
    return [previous_generation_dir(index_dir, back) for back in _previous_backs(index_dir)]


def _previous_backs(index_dir: Path) -> list[int]:
    return [back for back in range(1, _MOST_KEPT + 1) if previous_generation_dir(index_dir, back).is_dir()]


def generations(index_dir: Path) -> list[Generation]:
    """Every generation of ``index_dir`` on disk: the live one, the next one and the previous ones."""
    index_dir = Path(index_dir)
    paths = [("live", index_dir), ("next", next_generation_dir(index_dir))]
    paths += [(path.name.rsplit(".", 1)[-1], path) for path in previous_generations(index_dir)]
    return [_generation(role, path) for role, path in paths if path.is_dir()]


def _generation(role: str, path: Path) -> Generation:
    try:
        manifest = load_index_manifest(path)
    except IndexFormatError as error:
        return Generation(role, path, "", 0, "", problem=str(error))
    return Generation(role, path, manifest.model_sha256, manifest.count, manifest.updated_at)


def promote(index_dir: Path, incoming: Path, *, keep: int = KEEP_PREVIOUS) -> None:
    """Make ``incoming`` (the next generation) live, keeping the live one as the previous generation and
    at most ``keep`` previous ones, as one journaled set of renames. Call with the writer lock held."""
    index_dir = Path(index_dir)
    moves: Moves = []
    discard = []
    for back in reversed(_previous_backs(index_dir)):  # the oldest first, so each target is free
        target = previous_generation_dir(index_dir, back + 1)
        if back >= max(1, keep):
            target = discard_dir(index_dir, f"-previous-{back}")
            discard.append(target)
        moves.append((previous_generation_dir(index_dir, back), target))
    moves += [(index_dir, previous_generation_dir(index_dir)), (Path(incoming), index_dir)]
    move_directories(moves, moves_journal(index_dir), discard)


def restore_previous(index_dir: Path) -> None:
    """Make the most recent previous generation live again (a rollback), keeping the live one as the next
    generation (replacing one there) and moving the older previous ones up. Call with the writer lock held."""
    index_dir = Path(index_dir)
    incoming, outgoing = previous_generation_dir(index_dir), next_generation_dir(index_dir)
    moves: Moves = []
    discard = []
    if outgoing.exists():
        discard.append(discard_dir(index_dir, "-next"))
        moves.append((outgoing, discard[0]))
    moves += [(index_dir, outgoing), (incoming, index_dir)]
    for back in _previous_backs(index_dir)[1:]:
        moves.append((previous_generation_dir(index_dir, back), previous_generation_dir(index_dir, back - 1)))
    move_directories(moves, moves_journal(index_dir), discard)
