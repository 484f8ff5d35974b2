"""Several directory renames that happen all or none across a crash: a journal of the moves is written
first (``.NAME.moves.json`` beside ``NAME``), then the moves are made, then the journal is deleted.

A process killed in between leaves the journal; whoever reads the directory next (``finish_moves``,
called before an index manifest is read) makes the moves that are left, so readers never see a state
between two generations for longer than the crash. Each move is made only while its source exists and
its target does not, so replaying a journal twice changes nothing. A journal of a live process is left
to it. Directories a move puts out of the way for deletion (``discard_dir``: ``.NAME.discard-PID``) are
listed in the journal too and deleted when its moves are done, so a killed switch never leaks one; one
left by an older version (no journal) is deleted by the next reader once its process is gone
(``remove_stale_discards``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from retrieval.indexing.common.atomic_write import atomic_write_text, fsync_dir, process_alive

Moves = list[tuple[Path, Path]]


def moves_journal(target: Path) -> Path:
    """Where the journal of moves that end at (or start from) ``target`` is kept."""
    target = Path(target)
    return target.parent / f".{target.name}.moves.json"


def discard_dir(target: Path, tag: str = "") -> Path:
    """Where this process moves a directory beside ``target`` that is deleted once its moves are done
    (``tag`` tells several apart)."""
    target = Path(target)
    return target.parent / f".{target.name}.discard{tag}-{os.getpid()}"


def move_directories(moves: Moves, journal: Path, discard: list[Path] | None = None) -> None:
    """Make every move (source -> target, in order), then delete the ``discard`` directories; after a crash
    ``finish_moves(journal)`` ends both."""
    discard = list(discard or [])
    text = json.dumps(
        {
            "pid": os.getpid(),
            "moves": [[str(source), str(target)] for source, target in moves],
            "discard": [str(path) for path in discard],
        }
    )
    atomic_write_text(journal, text)
    _replay(moves, discard, journal)


def finish_moves(journal: Path) -> bool:
    """Make the moves a killed process left in ``journal``; False when there was nothing to finish."""
    try:
        recorded = json.loads(Path(journal).read_text())
    except (OSError, ValueError):
        return False
    if recorded.get("pid") != os.getpid() and process_alive(int(recorded.get("pid", 0))):
        return False  # its writer is still moving
    moves = [(Path(source), Path(target)) for source, target in recorded.get("moves", [])]
    _replay(moves, [Path(path) for path in recorded.get("discard", [])], Path(journal))
    return True


def leftover_discards(target: Path) -> list[Path]:
    """The ``.NAME.discard-PID`` directories beside ``target`` (a switch in progress, or a leak)."""
    target = Path(target)
    return sorted(path for path in target.parent.glob(f".{target.name}.discard*-*") if path.is_dir())


def remove_stale_discards(target: Path) -> list[Path]:
    """Delete the discard directories beside ``target`` whose process is gone; the ones deleted."""
    removed = []
    for path in leftover_discards(target):
        pid = path.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _replay(moves: Moves, discard: list[Path], journal: Path) -> None:
    for source, target in moves:
        if source.exists() and not target.exists():
            os.replace(source, target)
            fsync_dir(target.parent)
    for path in discard:
        shutil.rmtree(path, ignore_errors=True)
    journal.unlink(missing_ok=True)
