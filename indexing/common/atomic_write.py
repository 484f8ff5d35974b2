"""Write files so that a crash never leaves a half-written artifact: temp file + fsync + rename."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it is renamed over ``target``.

    For writers that want a file name (faiss.write_index, torch.save, sqlite backups).
    On an exception the temporary file is removed and ``target`` is untouched.
    """
    with atomic_paths([target]) as (tmp,):
        yield tmp


@contextmanager
def atomic_paths(targets: list[Path]) -> Iterator[list[Path]]:
    """``atomic_path`` for several files of one directory (a segment's two faiss indexes): each temporary
    file is written and fsynced, then all are renamed and the directory is fsynced once, not once per file.
    On an exception the temporary files are removed and no target is touched."""
    targets = [Path(target) for target in targets]
    if len({target.parent for target in targets}) > 1:
        raise ValueError("atomic_paths writes files of one directory")
    temporary: list[Path] = []
    try:
        temporary.extend(_temporary_beside(target) for target in targets)
        yield temporary
        for tmp in temporary:
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        for tmp, target in zip(temporary, targets, strict=True):
            os.replace(tmp, target)
        fsync_dir(targets[0].parent)
    finally:
        for tmp in temporary:
            if tmp.exists():
                tmp.unlink()


def _temporary_beside(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.chmod(tmp_name, 0o666 & ~_current_umask())  # mkstemp makes 0600; artifacts are shared with servers
    return Path(tmp_name)


def atomic_write_bytes(target: Path, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(target: Path, text: str) -> None:
    atomic_write_bytes(target, text.encode("utf-8"))


def atomic_write_with(target: Path, writer: Callable[[Path], None]) -> None:
    """Call ``writer(tmp_path)`` and rename the result over ``target``."""
    with atomic_path(target) as tmp:
        writer(tmp)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """Yield an empty staging directory beside ``target``; on success it replaces ``target``.

    For trees written file by file (a generated dataset). On an exception the staging directory
    is removed and ``target`` is untouched. The staging directory gets the permissions a plain
    ``mkdir`` gives (``0o777`` minus the umask): ``tempfile.mkdtemp`` makes it 0700, and the
    rename would hand that mode to ``target``, hiding the result from other users and containers.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(staging, 0o777 & ~_current_umask())
        yield staging
        replace_directory(staging, target)
        fsync_dir(target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def replace_directory(staging: Path, target: Path) -> None:
    """Move ``staging`` to ``target``, replacing an existing ``target`` directory."""
    if not target.exists():
        os.replace(staging, target)
        return
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    shutil.rmtree(old, ignore_errors=True)
    os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>building|old|discard)-(?P<pid>\d+)$")


def remove_dead_writers_leftovers(target: Path) -> list[Path]:
    """Delete the staging (``.NAME.building-PID``), swap (``.NAME.old-PID``) and discarded generation
    (``.NAME.discard-PID``) directories that killed writers left beside ``target``; those of live
    processes are kept. A writer killed between
    the two renames of ``replace_directory`` left no ``target``: its ``.old-PID`` is moved back first
    (``recover_swapped_out``). Returns what went."""
    target = Path(target)
    recover_swapped_out(target)
    removed = []
    for sibling, _ in _dead_writers_leftovers(target):
        shutil.rmtree(sibling, ignore_errors=True)
        removed.append(sibling)
    return removed


def recover_swapped_out(target: Path) -> Path | None:
    """Put back the directory a writer killed between the two renames of ``replace_directory`` moved
    aside (``.NAME.old-PID`` of a dead process) when nothing took its place; returns what was put back."""
    target = Path(target)
    if target.exists():
        return None
    for sibling, kind in _dead_writers_leftovers(target):
        if kind == "old":
            try:
                os.replace(sibling, target)
            except OSError:  # another process put one back first
                return None
            fsync_dir(target.parent)
            return sibling
    return None


def _dead_writers_leftovers(target: Path) -> list[tuple[Path, str]]:
    """(directory, "building" or "old") of dead processes beside ``target``, newest first."""
    found = []
    for sibling in target.parent.glob(f".{target.name}.*-*") if target.parent.is_dir() else ():
        match = _LEFTOVER.match(sibling.name)
        if match and match["name"] == target.name and not process_alive(int(match["pid"])):
            found.append((sibling, match["kind"]))
    return sorted(found, key=lambda pair: pair[0].stat().st_mtime_ns, reverse=True)


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (the owner of a leftover beside an artifact)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
