"""``atomic_directory``: a tree appears whole or not at all, with the permissions the umask asks for."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.indexing.common.atomic_write import atomic_directory
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset


@pytest.fixture()
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_the_directory_gets_0777_minus_the_umask(tmp_path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        with atomic_directory(tmp_path / "tree") as staging:
            (staging / "file.txt").write_text("x")
    finally:
        os.umask(previous)
    assert mode(tmp_path / "tree") == 0o777 & ~umask
    assert (tmp_path / "tree" / "file.txt").read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == ["tree"]  # no staging left behind


def test_a_failure_keeps_the_old_tree_and_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "tree"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic_directory(target) as staging:
        (staging / "half.txt").write_text("half")
        raise RuntimeError("writer died")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]
    assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
    with atomic_directory(target) as staging:
        (staging / "new.txt").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_synth_output_is_readable_by_others_under_umask_022(tmp_path: Path, umask_022: None) -> None:
    out = generate_synthetic_dataset(tmp_path / "data", classes=2, per_class=2, size=16, progress=False).out
    assert mode(out) == 0o755
    assert {mode(p) for p in out.rglob("*") if p.is_dir()} == {0o755}
    assert {mode(p) for p in out.rglob("*") if p.is_file()} == {0o644}
