"""One writer per index across processes: nobody extends a generation that another writer replaced.

Before: ``retrieval index add`` while the service ran, then one ``POST /items``, left an index whose
embeddings file had fewer rows than items.sqlite referenced (unopenable, CLI items lost), and a
rebuild under a running service did the same.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from index_fixtures import make_image
from serving_fixtures import API_KEY, serving_client

from retrieval.indexing.common.errors import IndexChangedError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.store.files.index_store import IndexStore


def _new_record(tmp_path: Path, name: str, class_index: int = 1) -> tuple[ImageRecord, np.ndarray]:
    path = tmp_path / f"{name}.png"
    make_image(class_index, 77).save(path)
    return ImageRecord(path=path, label=f"class_{class_index}"), np.asarray([path])


def _embed(index_dir: Path, paths: np.ndarray) -> np.ndarray:
    return OnnxEmbedder(index_dir / "model").embed_paths([Path(p) for p in paths], progress=False).embeddings


def test_a_writer_never_extends_a_generation_another_writer_replaced(fresh_index: Path, tmp_path: Path) -> None:
    record, paths = _new_record(tmp_path, "cli")
    vectors = _embed(fresh_index, paths)
    with IndexStore.open(fresh_index) as service, IndexStore.open(fresh_index) as cli:
        before = service.count
        (new_id,) = cli.add([record], vectors)
        with pytest.raises(IndexChangedError, match="changed by another writer"):
            service.add([record], vectors)
        with pytest.raises(IndexChangedError):
            service.remove([new_id])
    with IndexStore.open(fresh_index) as reopened:  # intact, with the CLI's item
        assert reopened.count == before + 1 and reopened.item(new_id).path == str(record.path)


def test_a_rebuild_under_an_open_store_is_detected(
    fresh_index: Path, tmp_path: Path, gallery_records: list[ImageRecord]
) -> None:
    record, paths = _new_record(tmp_path, "late")
    with IndexStore.open(fresh_index) as service:
        build_index(fresh_index / "model", gallery_records[:12], fresh_index, progress=False)
        with pytest.raises(IndexChangedError):
            service.add([record], _embed(fresh_index, paths))
    with IndexStore.open(fresh_index) as rebuilt:
        assert rebuilt.count == 12


def test_writers_in_other_processes_wait_for_the_lock(fresh_index: Path, tmp_path: Path) -> None:
    """A process holds the lock and writes a marker just before releasing it: our add must finish after."""
    marker, ready = tmp_path / "released", tmp_path / "holding"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import time
        from pathlib import Path
        from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer
        with exclusive_writer(Path({str(fresh_index)!r})):
            Path({str(ready)!r}).touch()
            time.sleep(1.5)
            Path({str(marker)!r}).touch()
    """),
        ]
    )
    try:
        while not ready.exists():
            assert holder.poll() is None
            time.sleep(0.05)
        record, paths = _new_record(tmp_path, "waiting")
        with IndexStore.open(fresh_index) as store:
            store.add([record], _embed(fresh_index, paths))
        assert marker.exists()  # the add could only commit once the other writer was done
    finally:
        holder.wait(timeout=30)


def test_the_service_answers_409_when_the_cli_wrote_first(fresh_index: Path, tmp_path: Path) -> None:
    record, paths = _new_record(tmp_path, "cli")
    png = (tmp_path / "cli.png").read_bytes()
    with serving_client(fresh_index) as client:
        with IndexStore.open(fresh_index) as cli:
            cli.add([record], _embed(fresh_index, paths))
        answer = client.post(
            "/items",
            files=[("images", ("x.png", png, "image/png"))],
            data={"labels": "x"},
            headers={"X-API-Key": API_KEY},
        )
        assert answer.status_code == 409, answer.text
        assert "another writer" in answer.json()["detail"]
        assert client.post("/admin/reload", headers={"X-API-Key": API_KEY}).status_code == 200
        again = client.post(
            "/items",
            files=[("images", ("x.png", png, "image/png"))],
            data={"labels": "x"},
            headers={"X-API-Key": API_KEY},
        )
        assert again.status_code == 201, again.text
    with IndexStore.open(fresh_index) as store:
        assert store.count == 32  # 30 + the CLI's item + the service's item


def test_a_build_removes_what_killed_writers_left_and_keeps_live_ones(
    tmp_path: Path, tiny_model_dir: Path, gallery_records: list[ImageRecord]
) -> None:
    import os

    out = tmp_path / "index"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # that process has exited
    leftovers = [tmp_path / f".index.building-{dead_pid}", tmp_path / f".index.old-{dead_pid}"]
    live = tmp_path / f".index.building-{os.getppid()}"
    for folder in [*leftovers, live]:
        (folder / "junk").mkdir(parents=True)
    build_index(tiny_model_dir, gallery_records[:6], out, progress=False)
    assert not any(folder.exists() for folder in leftovers)
    assert live.exists()  # another running writer's staging directory is not ours to delete
    assert IndexStore.open(out).count == 6


def _uploads(index_dir: Path) -> set[str]:
    folder = index_dir / "uploads"
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def test_uploads_are_stored_only_for_accepted_requests_and_leave_with_their_items(
    fresh_index: Path, tmp_path: Path
) -> None:
    from serving_fixtures import image_bytes

    key = {"X-API-Key": API_KEY}
    good, other = image_bytes(make_image(2, 91)), image_bytes(make_image(3, 92))
    with serving_client(fresh_index) as client:
        refused = client.post(  # the second file is not an image: nothing of the request is kept
            "/items",
            files=[("images", ("a.png", good, "image/png")), ("images", ("b.png", b"not an image", "image/png"))],
            data={"labels": "x"},
            headers=key,
        )
        assert refused.status_code == 400 and _uploads(fresh_index) == set()
        first = client.post(
            "/items", files=[("images", ("a.png", good, "image/png"))], data={"labels": "x"}, headers=key
        ).json()["ids"][0]
        twin = client.post(
            "/items", files=[("images", ("a2.png", good, "image/png"))], data={"labels": "x"}, headers=key
        ).json()["ids"][0]  # same bytes: one stored file, two items
        third = client.post(
            "/items", files=[("images", ("c.png", other, "image/png"))], data={"labels": "y"}, headers=key
        ).json()["ids"][0]
        assert len(_uploads(fresh_index)) == 2
        assert client.delete(f"/items/{first}", headers=key).status_code == 200
        assert len(_uploads(fresh_index)) == 2  # the twin still uses the file
        client.delete(f"/items/{twin}", headers=key)
        client.delete(f"/items/{third}", headers=key)
        assert _uploads(fresh_index) == set()


def test_a_retried_post_with_the_same_idempotency_key_adds_nothing(fresh_index: Path) -> None:
    from serving_fixtures import image_bytes

    png = image_bytes(make_image(4, 93))
    headers = {"X-API-Key": API_KEY, "Idempotency-Key": "upload-7f3a"}

    def post(key_headers: dict[str, str]):
        return client.post(
            "/items", files=[("images", ("a.png", png, "image/png"))], data={"labels": "x"}, headers=key_headers
        )

    with serving_client(fresh_index) as client:
        first = post(headers)
        retry = post(headers)  # the response to the first was "lost"
        assert first.status_code == retry.status_code == 201
        assert retry.json() == first.json() == {"ids": first.json()["ids"], "count": 31}
        other = post({**headers, "Idempotency-Key": "upload-8b4c"})  # a new key is a new request
        assert other.json()["count"] == 32 and other.json()["ids"] != first.json()["ids"]
        assert client.post("/admin/reload", headers={"X-API-Key": API_KEY}).status_code == 200
        assert post(headers).json() == first.json()  # remembered with the index, across reloads
    with IndexStore.open(fresh_index) as store:
        assert store.count == 32


def test_a_class_folder_name_that_is_not_utf8_is_one_sentence(tmp_path: Path, tiny_model_dir: Path) -> None:
    import os

    from retrieval.indexing.common.errors import DataError
    from retrieval.indexing.data.sources import load_records

    root = tmp_path / "data"
    root.mkdir()
    for name in (b"caf\xe9", b"plain"):  # Latin-1 bytes: not UTF-8
        folder = os.path.join(os.fsencode(root), name)
        os.mkdir(folder)
        make_image(0, 1).save(os.fsdecode(os.path.join(folder, b"a.png")))
    records = load_records(root)
    with pytest.raises(DataError, match=r'label "caf\\xe9" is not valid UTF-8'):
        build_index(tiny_model_dir, records, tmp_path / "index", progress=False)
    assert not (tmp_path / "index").exists()


def test_the_next_writer_removes_temp_files_a_killed_writer_left(fresh_index: Path, tmp_path: Path) -> None:
    leftover = fresh_index / ".embeddings.f16.npy.k1ll3d.tmp"
    record, paths = _new_record(tmp_path, "after-crash")
    with IndexStore.open(fresh_index) as store:
        leftover.write_bytes(b"\0" * 4096)  # what SIGKILL during write_embeddings leaves, after this open
        store.add([record], _embed(fresh_index, paths))
    assert not leftover.exists()


def test_a_filtered_search_of_a_store_opened_before_another_writers_add_finds_what_it_loaded(
    fresh_index: Path, tmp_path: Path
) -> None:
    """A service snapshot being replaced by a reload shares the item table with the new one: items the new
    one added match a filter there but are not in the old segments (before: ItemNotFoundError, a 404)."""
    from retrieval.indexing.store.shared.items.item_filter import parse_filter

    record, paths = _new_record(tmp_path, "late", class_index=1)
    vectors = _embed(fresh_index, paths)
    with IndexStore.open(fresh_index) as old, IndexStore.open(fresh_index) as newer:
        (new_id,) = newer.add([record], vectors)
        found = old.search(vectors, 10, where=parse_filter({"label": "class_1"}))
        ids = [item.id for item, _ in old.hits(found)]
    assert len(ids) == 5 and new_id not in ids
