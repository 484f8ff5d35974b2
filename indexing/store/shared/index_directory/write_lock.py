"""One writer per index directory, across processes: an OS file lock held for a whole update.

The lock file sits beside the directory (``.NAME.lock``), not inside it, because a rebuild
replaces the whole directory. ``flock`` locks are released by the kernel when the holder dies,
so a killed writer never leaves the index locked. Readers never take the lock: they read the
last committed generation (see ``index_store``).

Waiting is fair and bounded. A writer first takes a turnstile (``.NAME.lock.turn``), then the lock,
then lets the turnstile go: a writer that is waiting holds the turnstile, so one that has just finished
cannot take the lock again before it (a service writing steadily cannot starve a command). A writer
that has to wait says so once (a warning on the log, which the commands print) and gives up after
``timeout_s`` with an ``IndexBusyError``. The lock is re-entrant within a thread, so a command can
open an index under the lock and then update it.
"""

from __future__ import annotations

import fcntl
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

from retrieval.indexing.common.errors import IndexBusyError

WRITER_WAIT_S = 600.0
"""How long a writer waits for another one by default (a compaction of a large index takes minutes)."""
_POLL_S = (0.001, 0.05)  # first and longest pause between attempts
_log = logging.getLogger(__name__)
_held = threading.local()  # lock paths this thread holds -> depth


def lock_path(index_dir: Path) -> Path:
    index_dir = Path(index_dir).resolve()
    return index_dir.parent / f".{index_dir.name}.lock"


@contextmanager
def exclusive_writer(index_dir: Path, *, timeout_s: float = WRITER_WAIT_S) -> Iterator[None]:
    """Wait (fairly, at most ``timeout_s``) until this process is the index's only writer; release on
    exit (or on death). Re-entrant within a thread."""
    path = lock_path(index_dir)
    depths: dict[Path, int] = _held.__dict__.setdefault("depths", {})
    if depths.get(path):
        depths[path] += 1
        try:
            yield
        finally:
            depths[path] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        _acquire(handle, path.with_name(path.name + ".turn"), Path(index_dir), timeout_s)
        depths[path] = 1
        try:
            yield
        finally:
            del depths[path]
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def writer_if_free(index_dir: Path) -> Iterator[bool]:
    """The writer lock if nobody holds it now (True), else nothing (False); never waits. For readers that
    tidy up what dead writers left, which only the writer may touch."""
    with ExitStack() as stack:
        try:
            stack.enter_context(exclusive_writer(index_dir, timeout_s=0.0))
        except (IndexBusyError, OSError):  # busy, or the lock file cannot be created (read-only mount)
            yield False
            return
        yield True


def _acquire(handle: IO[bytes], turnstile: Path, index_dir: Path, timeout_s: float) -> None:
    """Through the turnstile to the lock; the turnstile is let go once the lock is held."""
    deadline = time.monotonic() + timeout_s
    announced = False
    with open(turnstile, "a+b") as gate:
        for held in (gate, handle):
            if _try(held):
                continue
            if not announced and timeout_s > 0:
                _log.warning(
                    "waiting for another writer of %s (the service or another command) to finish; giving up after %g s",
                    index_dir,
                    timeout_s,
                )
                announced = True
            _wait_for(held, deadline, index_dir, timeout_s)


def _wait_for(handle: IO[bytes], deadline: float, index_dir: Path, timeout_s: float) -> None:
    pause = _POLL_S[0]
    while not _try(handle):
        if time.monotonic() >= deadline:
            raise IndexBusyError(
                f"another writer (the service, or a command such as `retrieval index add`) has held the writer "
                f"lock of {index_dir} for {timeout_s:g} s; retry when it is done"
            )
        time.sleep(pause)
        pause = min(2 * pause, _POLL_S[1])


def _try(handle: IO[bytes]) -> bool:
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def remove_temp_files(index_dir: Path) -> list[Path]:
    """Delete the temporary files (``.NAME.*.tmp``, see ``atomic_write``) that a writer killed mid-update
    left in the index directory and its segment folders. Call with the writer lock held: then no live
    writer owns any."""
    index_dir = Path(index_dir)
    leftovers = sorted([*index_dir.glob(".*.tmp"), *index_dir.glob("segments/*/.*.tmp")])
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers
