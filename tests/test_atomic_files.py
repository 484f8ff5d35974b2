"""``atomic_paths`` (several files of one directory, one directory fsync) and a delta's embeddings file,
written without a memory map: the same bytes as the chunked writer's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.indexing.common import atomic_write
from retrieval.indexing.common.atomic_write import atomic_paths
from retrieval.indexing.store.files.segment_storage.segment_files import write_embeddings


def test_files_of_one_directory_appear_together_after_one_directory_fsync(tmp_path: Path, monkeypatch) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(atomic_write, "fsync_dir", synced.append)
    targets = [tmp_path / "a.bin", tmp_path / "b.bin"]
    with atomic_paths(targets) as temporary:
        for tmp, data in zip(temporary, (b"first", b"second"), strict=True):
            tmp.write_bytes(data)
        assert not any(target.exists() for target in targets)  # nothing is in place before the block ends
    assert [target.read_bytes() for target in targets] == [b"first", b"second"]
    assert synced == [tmp_path]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.bin", "b.bin"]  # no temporary file left


def test_a_failure_touches_no_target_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_paths([tmp_path / "a.bin", tmp_path / "b.bin"]) as temporary:
        temporary[0].write_bytes(b"new")
        raise RuntimeError("the writer failed")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.bin"]
    assert (tmp_path / "a.bin").read_bytes() == b"old"


def test_files_of_two_directories_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one directory"), atomic_paths([tmp_path / "a", tmp_path / "sub" / "b"]):
        pass


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_small_delta_is_written_as_the_chunked_writer_writes_it(tmp_path: Path, order: str) -> None:
    vectors = np.random.default_rng(3).standard_normal((300, 24)).astype(np.float32)
    write_embeddings(tmp_path / "whole", np.asarray(vectors, order=order))  # one chunk: no memory map
    write_embeddings(tmp_path / "chunked", vectors, chunk=7)
    written = (tmp_path / "whole" / "embeddings.f16.npy").read_bytes()
    assert written == (tmp_path / "chunked" / "embeddings.f16.npy").read_bytes()
    np.testing.assert_array_equal(np.load(tmp_path / "whole" / "embeddings.f16.npy"), vectors.astype(np.float16))
