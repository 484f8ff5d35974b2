"""Backup and verify: `retrieval index snapshot` copies an index consistently while a writer adds to it
(hard links where it can), `retrieval index verify` checks every file, id, vector and record and names
the first problem, and restoring a snapshot after a writer was killed mid-add gives back a verified index."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import faiss
import numpy as np
import pytest
from fastapi.testclient import TestClient
from index_fixtures import make_image
from serving_fixtures import API_KEY, image_bytes, make_settings, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing import usecases as api
from retrieval.indexing.common.artifact_names import (
    EMBEDDINGS_NAME,
    FLOAT_INDEX_NAME,
    INDEX_MANIFEST_NAME,
    ITEMS_DB_NAME,
    SNAPSHOT_MANIFEST_NAME,
)
from retrieval.indexing.common.errors import ConfigError, IndexFormatError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.serving.app import create_app
from retrieval.serving.images.upload_storage import store_upload

GALLERY = 30
RETRIEVAL = [sys.executable, "-c", "from retrieval.cli.main import main; main()"]

_WRITER = """
    import os, sys, time
    from pathlib import Path
    import numpy as np
    from retrieval.indexing.data.records import ImageRecord
    from retrieval.indexing.store.files import store_updates
    from retrieval.indexing.store.files.index_store import IndexStore

    index, ready, stop, die_after = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    store = IndexStore.open(index)
    vectors = np.eye(2, store.manifest.dim, dtype=np.float32)
    added = 0
    while not stop.exists():
        if added == die_after:  # SIGKILL right after this add's SQLite commit, before its faiss files
            store_updates.write_faiss_files = lambda *args: os._exit(9)
        store.add([ImageRecord(path=index / f"w{added}.png", label="written")] * 2, vectors)
        added += 1
        ready.touch()
        time.sleep(0.01)
"""


def _writer(index_dir: Path, tmp_path: Path, die_after: int = -1) -> tuple[subprocess.Popen, Path]:
    ready, stop = tmp_path / "writing", tmp_path / "stop"
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_WRITER), str(index_dir), str(ready), str(stop), str(die_after)]
    )
    while not ready.exists():
        assert process.poll() is None
        time.sleep(0.02)
    return process, stop


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_snapshots_taken_while_a_writer_adds_are_consistent(fresh_index: Path, tmp_path: Path) -> None:
    writer, stop = _writer(fresh_index, tmp_path)
    counts = []
    try:
        for n in range(3):
            result = _cli("index", "snapshot", str(fresh_index), str(tmp_path / f"snap{n}"))
            assert result.exit_code == 0, result.output
            counts.append(api.verify_index(tmp_path / f"snap{n}").items)
            time.sleep(0.1)
        assert writer.poll() is None  # it was writing throughout
    finally:
        stop.touch()
        writer.wait(timeout=60)
    assert counts == sorted(counts) and counts[0] >= GALLERY and (counts[-1] - GALLERY) % 2 == 0
    report = api.verify_index(tmp_path / "snap2")
    assert report.hashed_files >= 7 and report.vectors == report.items == counts[-1]
    for name in (FLOAT_INDEX_NAME, EMBEDDINGS_NAME):  # immutable files are hard links, not copies
        assert (tmp_path / "snap0" / name).stat().st_nlink >= 2


def test_restoring_a_snapshot_after_a_writer_was_killed_mid_add_verifies(fresh_index: Path, tmp_path: Path) -> None:
    snapshot = tmp_path / "snap"
    assert api.snapshot_index(fresh_index, snapshot).count == GALLERY
    writer, stop = _writer(fresh_index, tmp_path, die_after=3)
    assert writer.wait(timeout=60) == 9  # killed inside its fourth add
    stop.touch()
    shutil.rmtree(fresh_index)  # restore: the snapshot copied back in place of the index
    shutil.copytree(snapshot, fresh_index)
    result = _cli("index", "verify", str(fresh_index))
    assert result.exit_code == 0, result.output
    assert f"{GALLERY} items" in result.output and "files checked against their sha256" in result.output
    vectors = OnnxEmbedder(fresh_index / "model").embed_images([make_image(1, 93)])
    with IndexStore.open(fresh_index) as store:  # and it takes writes again
        store.add([ImageRecord(path=tmp_path / "after.png", label="after")], vectors)
        assert store.count == GALLERY + 1
    assert api.verify_index(fresh_index).items == GALLERY + 1  # snapshot.json is of an older generation now


def _with_upload(index_dir: Path) -> Path:
    data = image_bytes(make_image(4, 94))
    path = store_upload(index_dir, data)
    vectors = OnnxEmbedder(index_dir / "model").embed_images([make_image(4, 94)])
    with IndexStore.open(index_dir) as store:
        store.add([ImageRecord(path=path, label="uploaded")], vectors)
    return path


def _flip_a_byte(path: Path, offset: int = -20) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _flip_a_bit(path: Path, offset: int = -20) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _change_a_stored_vector(index_dir: Path) -> None:
    embeddings = np.load(index_dir / EMBEDDINGS_NAME, mmap_mode="r+")
    embeddings[3] = -embeddings[3]
    embeddings.flush()


def _flip_a_sign_code(index_dir: Path) -> None:
    index = faiss.read_index_binary(str(index_dir / "binary.faiss"))
    inner = faiss.downcast_IndexBinary(index.index)
    codes = faiss.vector_to_array(inner.xb)
    codes[0] ^= 0xFF  # eight sign bits of the first item
    faiss.copy_array_to_vector(codes, inner.xb)
    faiss.write_index_binary(index, str(index_dir / "binary.faiss"))


def _break_item_table(index_dir: Path) -> None:
    data = bytearray((index_dir / ITEMS_DB_NAME).read_bytes())
    data[4096 : 4096 + 200] = b"\xff" * 200
    (index_dir / ITEMS_DB_NAME).write_bytes(bytes(data))


def _move_the_manifest_ahead(index_dir: Path) -> None:
    manifest = json.loads((index_dir / INDEX_MANIFEST_NAME).read_text())
    manifest["generation"] += 5
    (index_dir / INDEX_MANIFEST_NAME).write_text(json.dumps(manifest))


def _forget_checksums(index_dir: Path) -> None:
    """The manifest of an index written by an older version: no file checksums."""
    manifest = json.loads((index_dir / INDEX_MANIFEST_NAME).read_text())
    del manifest["files"]
    (index_dir / INDEX_MANIFEST_NAME).write_text(json.dumps(manifest))


def _older(damage):
    """``damage`` on an index without checksums, so that the deeper checks meet it."""
    return lambda d, up: (_forget_checksums(d), damage(d, up))


def _set_item_column(index_dir: Path, column: str, sql_value: str) -> None:
    with sqlite3.connect(index_dir / ITEMS_DB_NAME) as db:
        db.execute(f"UPDATE items SET {column} = {sql_value} WHERE id = 2")
    db.close()


def _set_preprocessing(index_dir: Path, **values: int) -> None:
    path = index_dir / "model" / "model.json"
    model = json.loads(path.read_text())
    model["preprocessing"].update(values)
    path.write_text(json.dumps(model))


CHANGED = "has changed: its sha256 differs from the one recorded in the manifest"
DAMAGES = {
    "a changed file of a snapshot": (True, lambda d, up: _flip_a_byte(d / FLOAT_INDEX_NAME), "float.faiss has changed"),
    "a stored vector": (False, _older(lambda d, up: _change_a_stored_vector(d)), "float index differs from its stored"),
    "a sign code": (False, _older(lambda d, up: _flip_a_sign_code(d)), "binary index differs from the sign codes"),
    "a lost stored image": (False, lambda d, up: up.unlink(), "is missing from uploads/"),
    "a changed stored image": (False, lambda d, up: up.write_bytes(b"x"), "its sha256 is not its name"),
    "the item table": (False, lambda d, up: _break_item_table(d), "items.sqlite is corrupt"),
    "the generations": (False, lambda d, up: _move_the_manifest_ahead(d), "an update was interrupted"),
    "the model copy": (
        False,
        _older(lambda d, up: _flip_a_byte(d / "model" / "model.onnx")),
        "model.onnx has sha256",
    ),
    "the model's resize": (
        False,
        lambda d, up: _set_preprocessing(d, resize=20),
        "model/ has changed since the index was built",
    ),
    "the model's crop": (False, lambda d, up: _set_preprocessing(d, crop=30), "makes 3 x 30 x 30 images"),
    "a low bit of a faiss file": (False, lambda d, up: _flip_a_bit(d / FLOAT_INDEX_NAME), f"float.faiss {CHANGED}"),
    "a low bit of the embeddings": (False, lambda d, up: _flip_a_bit(d / EMBEDDINGS_NAME), f"f16.npy {CHANGED}"),
    "a low bit of the item table": (False, lambda d, up: _flip_a_bit(d / ITEMS_DB_NAME, 3000), "items.sqlite"),
    "the embeddings' header": (
        False,
        _older(lambda d, up: _flip_a_byte(d / EMBEDDINGS_NAME, 11)),
        f"{EMBEDDINGS_NAME} is corrupt",
    ),
    "a path that is not UTF-8": (
        False,
        _older(lambda d, up: _set_item_column(d, "path", "CAST(X'2F746D702FFF2E706E67' AS TEXT)")),
        "items.sqlite holds item 2 with a path that is not UTF-8",
    ),
    "metadata that is not JSON": (
        False,
        _older(lambda d, up: _set_item_column(d, "metadata", "'{\"file\": '")),
        "items.sqlite holds item 2 with metadata that is not JSON",
    ),
    "a deleted index file": (False, lambda d, up: (d / FLOAT_INDEX_NAME).unlink(), "float.faiss is missing"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_verify_names_the_first_problem_and_exits_non_zero(fresh_index: Path, tmp_path: Path, damage: str) -> None:
    upload = _with_upload(fresh_index)
    snapshot, change, message = DAMAGES[damage]
    target = fresh_index
    if snapshot:
        target = tmp_path / "snap"
        api.snapshot_index(fresh_index, target)
        assert (target / SNAPSHOT_MANIFEST_NAME).is_file()
        upload = target / "uploads" / upload.name
    assert api.verify_index(target).items == GALLERY + 1  # sound before the damage
    change(target, upload)
    with pytest.raises(IndexFormatError, match=message):
        api.verify_index(target)
    done = subprocess.run([*RETRIEVAL, "index", "verify", str(target)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and message in done.stderr
    assert "Traceback" not in done.stderr


def test_verify_says_when_an_older_index_has_no_checksums(fresh_index: Path) -> None:
    assert api.verify_index(fresh_index).hashed_files >= 5  # every file: faiss, embeddings, items, model
    _forget_checksums(fresh_index)
    report = api.verify_index(fresh_index)
    assert report.hashed_files == 0 and any("records no file checksums" in note for note in report.notes)
    vectors = OnnxEmbedder(fresh_index / "model").embed_images([make_image(1, 93)])
    with IndexStore.open(fresh_index) as store:  # the next write records them
        store.add([ImageRecord(path=fresh_index / "x.png", label="x")], vectors)
    assert api.verify_index(fresh_index).hashed_files >= 5


def _item_of(index_dir: Path, path: Path) -> int:
    with IndexStore.open(index_dir) as store:
        return next(item.id for item in store.all_items() if item.path == str(path))


def _store_paths_absolute(index_dir: Path) -> None:
    """Paths into the index as an older version stored them: absolute."""
    with sqlite3.connect(index_dir / ITEMS_DB_NAME) as db:
        db.execute("UPDATE items SET path = ? || path WHERE path NOT LIKE '/%'", (f"{index_dir}/",))
    db.close()


@pytest.mark.parametrize("older", [False, True], ids=["relative", "older absolute"])
def test_a_snapshot_serves_its_own_stored_images(fresh_index: Path, tmp_path: Path, older: bool) -> None:
    upload = _with_upload(fresh_index)
    item_id = _item_of(fresh_index, upload)
    if older:
        _store_paths_absolute(fresh_index)
        assert _item_of(fresh_index, upload) == item_id  # read as it is
    snapshot = tmp_path / "snap"
    api.snapshot_index(fresh_index, snapshot)
    shutil.rmtree(fresh_index)
    report = api.verify_index(snapshot)
    assert report.uploads == 1 and report.missing_count == 0, report.missing_images
    assert _item_of(snapshot, snapshot / "uploads" / upload.name) == item_id
    with serving_client(snapshot) as client:
        answer = client.get(f"/items/{item_id}/image")
        assert answer.status_code == 200, answer.text
        assert answer.content == (snapshot / "uploads" / upload.name).read_bytes()


def test_verify_deep_embeds_stored_images_again(fresh_index: Path) -> None:
    report = api.verify_index(fresh_index, deep=True, sample=8)
    assert any("8 stored images embedded again agree" in note for note in report.notes)
    _forget_checksums(fresh_index)  # an older index: no checksums, no model hash
    manifest = json.loads((fresh_index / INDEX_MANIFEST_NAME).read_text())
    del manifest["model_files_sha256"]
    (fresh_index / INDEX_MANIFEST_NAME).write_text(json.dumps(manifest))
    _set_preprocessing(fresh_index, resize=20)  # a search with an item's own image finds another first
    assert any("no sha256 of the model's settings" in n for n in api.verify_index(fresh_index).notes)
    with pytest.raises(IndexFormatError, match="embedded again with model/ differs from its stored vector"):
        api.verify_index(fresh_index, deep=True)
    result = _cli("index", "verify", str(fresh_index), "--deep", "--sample", "4")
    assert result.exit_code != 0 and "differs from its stored vector" in str(result.exception or result.output)


def test_the_service_refuses_a_model_whose_settings_do_not_fit_its_graph(fresh_index: Path) -> None:
    _set_preprocessing(fresh_index, crop=30)
    app = create_app(make_settings(index_dir=fresh_index, api_key=API_KEY))
    with TestClient(app) as client:
        ready = client.get("/readyz")
        for _ in range(100):
            if "does not fit" in ready.text:
                break
            time.sleep(0.05)
            ready = client.get("/readyz")
        assert ready.status_code == 503 and "crop 30" in ready.json()["detail"], ready.text
        answer = client.post("/search", files={"image": ("q.png", image_bytes(make_image(1, 90)), "image/png")})
        assert answer.status_code == 503 and "does not fit model.onnx" in answer.json()["detail"]


def test_the_commands_refuse_what_they_cannot_do(fresh_index: Path, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "photo.jpg").write_bytes(b"keep me")
    with pytest.raises(ConfigError, match="not an empty directory"):
        api.snapshot_index(fresh_index, tmp_path / "full")
    with pytest.raises(ConfigError, match="inside the index"):
        api.snapshot_index(fresh_index, fresh_index / "backup")
    manifest = json.loads((fresh_index / INDEX_MANIFEST_NAME).read_text())
    manifest.update(backend="milvus", milvus_uri=str(tmp_path / "x.db"), milvus_collection="items")
    (fresh_index / INDEX_MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="Milvus"):
        api.snapshot_index(fresh_index, tmp_path / "snap")
    with pytest.raises(ConfigError, match="Milvus"):
        api.verify_index(fresh_index)
    assert (tmp_path / "full" / "photo.jpg").read_bytes() == b"keep me"


def test_sqlite_reads_the_snapshot_item_table(fresh_index: Path, tmp_path: Path) -> None:
    api.snapshot_index(fresh_index, tmp_path / "snap")
    with sqlite3.connect(tmp_path / "snap" / ITEMS_DB_NAME) as db:
        assert db.execute("SELECT COUNT(*) FROM items").fetchone()[0] == GALLERY
