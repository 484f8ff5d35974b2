"""What killed or competing writers leave behind is recovered, and a writer never waits forever:
a killed add is counted by `index info`, a build killed between its two renames gives the previous index
back, temporary files of dead writers go on the next open, and the writer lock is fair (a steady writer
cannot starve another) with a message while waiting and a timeout."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from index_fixtures import make_image
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.artifact_names import SEGMENTS_SUBDIR
from retrieval.indexing.common.errors import IndexBusyError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer

GALLERY = 30


def _python(code: str, *args: str, wait: bool = True) -> subprocess.Popen | subprocess.CompletedProcess:
    command = [sys.executable, "-c", textwrap.dedent(code), *args]
    if not wait:
        return subprocess.Popen(command)
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _info(index_dir: Path) -> str:
    result = CliRunner().invoke(app, ["index", "info", str(index_dir)])
    assert result.exit_code == 0, result.output
    return result.output


_KILLED_ADD = """
    import os, sys
    from pathlib import Path
    from retrieval.indexing.data.records import ImageRecord
    from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
    from retrieval.indexing.store.files import store_updates
    from retrieval.indexing.store.files.index_store import IndexStore

    index, image = Path(sys.argv[1]), Path(sys.argv[2])
    vectors = OnnxEmbedder(index / "model").embed_paths([image], progress=False).embeddings
    store_updates.write_faiss_files = lambda *args: os._exit(9)  # SIGKILL right after the SQLite commit
    IndexStore.open(index).add([ImageRecord(path=image, label="late")], vectors)
"""


def test_index_info_counts_an_add_killed_after_its_commit(fresh_index: Path, tmp_path: Path) -> None:
    image = tmp_path / "late.png"
    make_image(3, 90).save(image)
    killed = _python(_KILLED_ADD, str(fresh_index), str(image))
    assert killed.returncode == 9, killed.stderr
    assert f"items      {GALLERY + 1} (" in _info(fresh_index)


_KILLED_BUILD = """
    import os, sys
    from pathlib import Path
    from retrieval.indexing.common import atomic_write
    from retrieval.indexing.store.build.builder import build_index
    from retrieval.indexing.data.records import ImageRecord

    model, out, image = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    real = os.replace

    def dying(source, target):
        real(source, target)
        if ".old-" in str(target):  # the live index has moved aside, the new one is not in yet
            os._exit(9)

    atomic_write.os.replace = dying
    build_index(model, [ImageRecord(path=image, label="only")], out, progress=False)
"""


def test_a_build_killed_between_its_renames_gives_the_previous_index_back(fresh_index: Path, tmp_path: Path) -> None:
    image = tmp_path / "one.png"
    make_image(1, 91).save(image)
    killed = _python(_KILLED_BUILD, str(fresh_index / "model"), str(fresh_index), str(image))
    assert killed.returncode == 9, killed.stderr
    assert not fresh_index.exists() and list(fresh_index.parent.glob(f".{fresh_index.name}.old-*"))
    with open_store(fresh_index) as store:  # the next open puts the previous index back
        assert store.count == GALLERY
    assert not list(fresh_index.parent.glob(f".{fresh_index.name}.old-*"))
    assert f"items      {GALLERY} (" in _info(fresh_index)


def _add_one(index_dir: Path, tmp_path: Path) -> None:
    image = tmp_path / "delta.png"
    make_image(2, 92).save(image)
    from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder

    vectors = OnnxEmbedder(index_dir / "model").embed_paths([image], progress=False).embeddings
    with IndexStore.open(index_dir) as store:
        store.add([ImageRecord(path=image, label="delta")], vectors)


@contextmanager
def _held_elsewhere(index_dir: Path) -> Iterator[None]:
    """The writer lock held by another thread for the duration of the block."""
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with exclusive_writer(index_dir):
            held.set()
            done.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    try:
        yield
    finally:
        done.set()
        holder.join()


def test_temporary_files_of_dead_writers_are_removed_on_open(fresh_index: Path, tmp_path: Path) -> None:
    _add_one(fresh_index, tmp_path)
    (delta,) = (fresh_index / SEGMENTS_SUBDIR).iterdir()
    leftovers = [fresh_index / ".embeddings.f16.npy.k1ll3d.tmp", delta / ".float.faiss.k1ll3d.tmp"]
    for path in leftovers:
        path.write_bytes(b"\0" * 4096)
    with _held_elsewhere(fresh_index), IndexStore.open(fresh_index) as store:  # a live writer's: not ours
        assert store.count == GALLERY + 1 and all(path.exists() for path in leftovers)
    with IndexStore.open(fresh_index) as store:
        assert store.count == GALLERY + 1
    assert not any(path.exists() for path in leftovers)


_STEADY_SERVICE = """
    import sys, time
    from pathlib import Path
    import numpy as np
    from retrieval.indexing.common.errors import IndexChangedError
    from retrieval.indexing.data.records import ImageRecord
    from retrieval.indexing.store.files.index_store import IndexStore

    index, ready, stop = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    store = IndexStore.open(index)
    vector = np.eye(1, store.manifest.dim, dtype=np.float32)
    while not stop.exists():  # the service adding an item every few milliseconds, reloading when told to
        try:
            store.add([ImageRecord(path=index / "x.png", label="steady")], vector)
        except IndexChangedError:
            store.close()
            store = IndexStore.open(index)
        ready.touch()
        time.sleep(0.005)
"""


def test_index_add_succeeds_while_the_service_writes_steadily(fresh_index: Path, tmp_path: Path) -> None:
    data = tmp_path / "more"
    for n in range(12):
        (data / f"class_{n % 3}").mkdir(parents=True, exist_ok=True)
        make_image(n % 3, 200 + n).save(data / f"class_{n % 3}" / f"{n}.png")
    ready, stop = tmp_path / "writing", tmp_path / "stop"
    service = _python(_STEADY_SERVICE, str(fresh_index), str(ready), str(stop), wait=False)
    try:
        while not ready.exists():
            assert service.poll() is None
            time.sleep(0.02)
        result = CliRunner().invoke(app, ["index", "add", str(fresh_index), "--data", str(data), "--quiet"])
        assert service.poll() is None  # the service was still writing throughout
    finally:
        stop.touch()
        service.wait(timeout=60)
    assert result.exit_code == 0, result.output
    assert "added 12 images" in result.output
    with IndexStore.open(fresh_index) as store:
        assert sum(item.label.startswith("class_") and "more" in item.path for item in store.all_items()) == 12


def test_a_writer_that_cannot_get_the_lock_says_so_and_gives_up_after_its_timeout(
    fresh_index: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ready = tmp_path / "holding"
    holder = _python(
        """
        import sys, time
        from pathlib import Path
        from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer
        with exclusive_writer(Path(sys.argv[1])):
            Path(sys.argv[2]).touch()
            time.sleep(4)
        """,
        str(fresh_index),
        str(ready),
        wait=False,
    )
    try:
        while not ready.exists():
            time.sleep(0.02)
        with pytest.raises(IndexBusyError, match=r"another writer .* for 0\.5 s"):
            with exclusive_writer(fresh_index, timeout_s=0.5):
                pass
        assert "waiting for another writer" in caplog.text
    finally:
        holder.wait(timeout=30)
