"""Several directory renames that happen all or none across a crash: a journal of the moves is written
first (``.NAME.moves.json`` beside ``NAME``), then the moves are made, then the journal is deleted.

A process killed in between leaves the journal; whoever reads the directory next (``finish_moves``,
called before an index manifest is read) makes the moves that are left, so readers never see a state
between two generations for longer than the crash. Each move is made only while its source exists and
its target does not, so replaying a journal twice changes nothing. A journal of a live process is left
to it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from retrieval.indexing.common.atomic_write import atomic_write_text, fsync_dir, process_alive

Moves = list[tuple[Path, Path]]


def moves_journal(target: Path) -> Path:
    """Where the journal of moves that end at (or start from) ``target`` is kept."""
    target = Path(target)
    return target.parent / f".{target.name}.moves.json"


def move_directories(moves: Moves, journal: Path) -> None:
    """Make every move (source -> target, in order); after a crash ``finish_moves(journal)`` ends them."""
    text = json.dumps({"pid": os.getpid(), "moves": [[str(source), str(target)] for source, target in moves]})
    atomic_write_text(journal, text)
    _replay(moves, journal)


def finish_moves(journal: Path) -> bool:
    """Make the moves a killed process left in ``journal``; False when there was nothing to finish."""
    try:
        recorded = json.loads(Path(journal).read_text())
    except (OSError, ValueError):
        return False
    if recorded.get("pid") != os.getpid() and process_alive(int(recorded.get("pid", 0))):
        return False  # its writer is still moving
    _replay([(Path(source), Path(target)) for source, target in recorded.get("moves", [])], Path(journal))
    return True


def _replay(moves: Moves, journal: Path) -> None:
    for source, target in moves:
        if source.exists() and not target.exists():
            os.replace(source, target)
            fsync_dir(target.parent)
    journal.unlink(missing_ok=True)
