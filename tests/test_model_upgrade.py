"""A model upgrade without downtime: `retrieval index rebuild --model NEW` re-embeds every item beside the
live index (same ids and records), catches up with the writes made meanwhile, switches atomically, goes
on after a kill, and `index rollback` / `index switch` move between the generations; a service keeps
answering throughout and serves the new model after its reload."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from index_fixtures import export_tiny_model, make_image
from serving_fixtures import API_KEY, image_bytes, query_png, running_server, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing import usecases as api
from retrieval.indexing.common.directory_moves import moves_journal
from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.maintenance import generation_sync
from retrieval.indexing.store.maintenance.generations import next_generation_dir, previous_generation_dir
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest
from retrieval.serving import batcher, service_state
from retrieval.serving.images.upload_storage import store_upload

GALLERY = 30
KEY = {"X-API-Key": API_KEY}


@pytest.fixture(scope="module")
def new_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another model: other weights and another embedding size."""
    return export_tiny_model(tmp_path_factory.mktemp("new") / "export", dim=32, seed=1)


def _records(index_dir: Path) -> dict[int, tuple[str, str, dict]]:
    with IndexStore.open(index_dir) as store:
        return {item.id: (item.path, item.label, item.metadata) for item in store.all_items()}


def _embedded_by(index_dir: Path, model_dir: Path) -> float:
    """The largest difference between the stored embeddings and ``model_dir``'s embeddings of the images."""
    embedder = OnnxEmbedder(model_dir)
    with IndexStore.open(index_dir) as store:
        items = store.all_items()
        stored = store.embeddings_of([item.id for item in items])
    fresh = embedder.embed_paths([Path(item.path) for item in items], progress=False).embeddings
    return float(np.abs(stored - fresh).max())


def _add_upload(index_dir: Path, image_item: int, key: str | None = None, item_key: str | None = None) -> int:
    path = store_upload(index_dir, image_bytes(make_image(4, image_item)))
    vectors = OnnxEmbedder(index_dir / "model").embed_images([make_image(4, image_item)])
    with IndexStore.open(index_dir) as store:
        record = ImageRecord(path=path, label="uploaded", key=item_key)
        (new_id,) = store.add([record], vectors, idempotency_key=key)
    return new_id


def test_rebuild_switches_to_the_new_model_with_the_same_items(fresh_index: Path, new_model: Path) -> None:
    uploaded = _add_upload(fresh_index, 95, item_key="sku-95")
    before = _records(fresh_index)
    old_sha = load_index_manifest(fresh_index).model_sha256
    report = api.rebuild_index(fresh_index, new_model)
    assert report.switched and report.count == GALLERY + 1
    manifest = load_index_manifest(fresh_index)
    assert manifest.model_sha256 == OnnxEmbedder(new_model).model_sha256 and manifest.dim == 32
    assert _records(fresh_index) == before  # same ids, paths, labels, metadata
    assert _embedded_by(fresh_index, new_model) < 2e-3  # float16 storage
    assert api.verify_index(fresh_index).items == GALLERY + 1
    assert Path(before[uploaded][0]).is_file()  # the stored image is in the new generation too
    assert load_index_manifest(previous_generation_dir(fresh_index)).model_sha256 == old_sha
    assert not next_generation_dir(fresh_index).exists()
    with IndexStore.open(fresh_index) as store:
        assert store.item_by_key("sku-95").id == uploaded  # the item keys came along


def test_writes_made_during_the_rebuild_reach_the_new_generation(
    fresh_index: Path, new_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(generation_sync, "CHUNK", 8)
    written: dict[str, int] = {}

    def service_writes(done: int, total: int) -> None:  # runs between the rebuild's chunks
        if not written:
            written["added"] = _add_upload(fresh_index, 96, key="retry-me")
            with IndexStore.open(fresh_index) as store:
                store.remove([2])

    report = api.rebuild_index(fresh_index, new_model, progress=service_writes)
    assert report.switched
    records = _records(fresh_index)
    assert written["added"] in records and 2 not in records and len(records) == GALLERY
    assert _embedded_by(fresh_index, new_model) < 2e-3
    with IndexStore.open(fresh_index) as store:
        assert store.recall("retry-me") == {"ids": [written["added"]], "count": GALLERY + 1}  # a retry still answered
        vector = OnnxEmbedder(new_model).embed_images([make_image(2, 97)])
        (newest,) = store.add([ImageRecord(path=fresh_index / "n.png", label="n")], vector)
    assert newest == written["added"] + 1  # ids go on from the live index's, never reused


_KILLED_REBUILD = """
    import os, sys
    from pathlib import Path
    from retrieval.indexing import usecases as api
    from retrieval.indexing.store.maintenance import generation_sync

    generation_sync.CHUNK = 8
    def die(done, total):
        if done >= 16:
            os._exit(9)  # SIGKILL after two committed chunks
    api.rebuild_index(Path(sys.argv[1]), Path(sys.argv[2]), progress=die)
"""


def test_a_killed_rebuild_goes_on_where_it_stopped(
    fresh_index: Path, new_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_KILLED_REBUILD), str(fresh_index), str(new_model)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 9, done.stderr
    assert load_index_manifest(fresh_index).dim == 64  # the live index is untouched
    embedded: list[int] = []
    original = OnnxEmbedder.embed_paths

    def counting(self, paths, **kwargs):
        embedded.append(len(paths))
        return original(self, paths, **kwargs)

    monkeypatch.setattr(OnnxEmbedder, "embed_paths", counting)
    report = api.rebuild_index(fresh_index, new_model)
    assert report.switched and report.embedded == GALLERY - 16 == sum(embedded)
    assert _embedded_by(fresh_index, new_model) < 2e-3 and api.verify_index(fresh_index).items == GALLERY


def test_rollback_returns_to_the_old_model_with_what_was_added_since(fresh_index: Path, new_model: Path) -> None:
    old_model = fresh_index.parent / "old-model"
    shutil.copytree(fresh_index / "model", old_model)
    api.rebuild_index(fresh_index, new_model)
    added = _add_upload(fresh_index, 98)  # written after the switch, embedded by the new model
    report = api.rollback_index(fresh_index)
    assert report.switched and report.embedded == 1
    assert load_index_manifest(fresh_index).dim == 64 and added in _records(fresh_index)
    assert _embedded_by(fresh_index, old_model) < 2e-3
    assert load_index_manifest(next_generation_dir(fresh_index)).dim == 32  # the rolled-back one, kept
    again = api.switch_index(fresh_index)  # and back: it only catches up
    assert again.switched and again.embedded == 0 and load_index_manifest(fresh_index).dim == 32


def test_a_switch_killed_between_its_renames_is_finished_by_the_next_reader(fresh_index: Path, new_model: Path) -> None:
    api.rebuild_index(fresh_index, new_model, switch=False)
    incoming, outgoing = next_generation_dir(fresh_index), previous_generation_dir(fresh_index)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    journal = moves_journal(fresh_index)
    moves = [[str(fresh_index), str(outgoing)], [str(incoming), str(fresh_index)]]
    journal.write_text(f'{{"pid": {int(dead.stdout)}, "moves": {moves}}}'.replace("'", '"'))
    os.replace(fresh_index, outgoing)  # the first rename happened, then the process died
    assert load_index_manifest(fresh_index).dim == 32  # the next reader finished the switch
    assert not journal.exists() and load_index_manifest(outgoing).dim == 64


def test_a_repeated_rebuild_keeps_the_way_back_to_the_old_model(fresh_index: Path, new_model: Path) -> None:
    old_sha, new_sha = load_index_manifest(fresh_index).model_sha256, OnnxEmbedder(new_model).model_sha256
    api.rebuild_index(fresh_index, new_model)
    again = api.rebuild_index(fresh_index, new_model)  # e.g. re-run after a kill that came after the switch
    assert not again.switched and again.embedded == 0 and "already uses model" in again.unchanged
    result = CliRunner().invoke(app, ["index", "rebuild", str(fresh_index), "--model", str(new_model), "--quiet"])
    assert result.exit_code == 0 and "nothing to rebuild" in result.output, result.output
    assert load_index_manifest(previous_generation_dir(fresh_index)).model_sha256 == old_sha
    assert api.rollback_index(fresh_index).switched
    assert load_index_manifest(fresh_index).model_sha256 == old_sha and load_index_manifest(fresh_index).dim == 64
    assert load_index_manifest(next_generation_dir(fresh_index)).model_sha256 == new_sha


def test_a_switch_keeps_the_previous_generations_it_is_told_to_and_info_lists_them(
    fresh_index: Path, new_model: Path, tmp_path: Path
) -> None:
    third = export_tiny_model(tmp_path / "third", dim=16, seed=2)
    shas = [load_index_manifest(fresh_index).model_sha256, OnnxEmbedder(new_model).model_sha256]
    api.rebuild_index(fresh_index, new_model)
    api.rebuild_index(fresh_index, third)  # default: two previous generations
    kept = {g.role: g.model_sha256 for g in api.index_generations(fresh_index)}
    assert kept == {"live": OnnxEmbedder(third).model_sha256, "previous": shas[1], "previous-2": shas[0]}
    info = CliRunner().invoke(app, ["index", "info", str(fresh_index)])
    assert info.exit_code == 0 and f"previous-2: model {shas[0][:12]}, {GALLERY} items" in info.output, info.output
    api.rollback_index(fresh_index)  # back one: the one before moves up
    assert load_index_manifest(fresh_index).model_sha256 == shas[1]
    assert load_index_manifest(previous_generation_dir(fresh_index)).model_sha256 == shas[0]
    api.rollback_index(fresh_index)
    assert load_index_manifest(fresh_index).model_sha256 == shas[0]
    assert api.rebuild_index(fresh_index, new_model, keep=1).switched  # one kept: the older one deleted
    assert [g.role for g in api.index_generations(fresh_index)] == ["live", "previous"]
    assert not list(fresh_index.parent.glob(".index.discard*"))


_KILLED_SWITCH = """
    import os, sys
    from pathlib import Path
    from retrieval.indexing.store.maintenance.generations import promote

    index, replace = Path(sys.argv[1]), os.replace
    def replace_until_the_index(source, target):  # SIGKILL before the live index is moved
        if Path(source) == index:
            os._exit(9)
        replace(source, target)
    os.replace = replace_until_the_index
    promote(index, index.parent / f".{index.name}.next", keep=1)
"""


def test_a_killed_switch_leaks_no_generation(fresh_index: Path, new_model: Path) -> None:
    shutil.copytree(fresh_index, previous_generation_dir(fresh_index))  # an older generation to replace
    api.rebuild_index(fresh_index, new_model, switch=False)
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(_KILLED_SWITCH), str(fresh_index)], timeout=120)
    assert killed.returncode == 9 and list(fresh_index.parent.glob(".index.discard*"))  # put aside, then killed
    assert api.index_info(fresh_index).dim == 32  # the next reader finishes the switch ...
    assert not list(fresh_index.parent.glob(".index.discard*"))  # ... and deletes what it put aside
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leaked = fresh_index.parent / f".index.discard-{int(dead.stdout)}"  # an older version's leak: no journal
    shutil.copytree(fresh_index, leaked)
    assert api.verify_index(fresh_index).items == GALLERY and not leaked.exists()
    busy = fresh_index.parent / f".index.discard-{os.getpid()}"  # a switch in progress: reported, left alone
    shutil.copytree(fresh_index, busy)
    assert any(busy.name in note for note in api.verify_index(fresh_index).notes) and busy.exists()


def test_an_item_the_new_model_cannot_read_stops_the_switch(fresh_index: Path, new_model: Path) -> None:
    lost = _add_upload(fresh_index, 99)
    Path(_records(fresh_index)[lost][0]).unlink()  # its image file is gone
    with pytest.raises(DataError, match=rf"item {lost}: .*file not found.*retrieval index remove"):
        api.rebuild_index(fresh_index, new_model)
    assert load_index_manifest(fresh_index).dim == 64  # nothing switched
    with IndexStore.open(fresh_index) as store:
        store.remove([lost])
    assert api.rebuild_index(fresh_index, new_model).count == GALLERY  # without it, the switch goes through


def test_a_milvus_index_is_refused(fresh_index: Path, new_model: Path, tmp_path: Path) -> None:
    import json

    manifest = json.loads((fresh_index / "manifest.json").read_text())
    manifest.update(backend="milvus", milvus_uri=str(tmp_path / "x.db"), milvus_collection="items")
    (fresh_index / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="Milvus"):
        api.rebuild_index(fresh_index, new_model)
    with pytest.raises(ConfigError, match="Milvus"):
        api.rollback_index(fresh_index)


def test_switch_and_rollback_say_when_there_is_nothing_to_switch_to(fresh_index: Path) -> None:
    with pytest.raises(ConfigError, match="no previous generation"):
        api.rollback_index(fresh_index)
    with pytest.raises(ConfigError, match="no next generation .* index rebuild"):
        api.switch_index(fresh_index)


def test_the_service_answers_throughout_and_serves_the_new_model_after_its_reload(
    fresh_index: Path, new_model: Path
) -> None:
    failures: list[str] = []
    answered = 0
    done = threading.Event()

    def search(base: str) -> None:
        nonlocal answered
        with httpx.Client(base_url=base, timeout=30) as http:
            while not done.is_set():
                response = http.post("/search", files={"image": ("q.png", query_png(3), "image/png")})
                if response.status_code != 200:
                    failures.append(f"{response.status_code} {response.text}")
                answered += 1

    with running_server(fresh_index) as base:
        searcher = threading.Thread(target=search, args=(base,))
        searcher.start()
        try:
            api.rebuild_index(fresh_index, new_model)
            reloaded = httpx.post(f"{base}/admin/reload", headers={"X-API-Key": API_KEY}, timeout=30)
            assert reloaded.status_code == 200
            served = httpx.get(f"{base}/readyz", timeout=30).json()
        finally:
            done.set()
            searcher.join()
    assert failures == [] and answered > 0
    assert served["model_sha256"] == OnnxEmbedder(new_model).model_sha256 and served["embedding_dim"] == 32


def test_an_add_embedded_before_a_reload_is_kept_unless_the_model_changed(
    fresh_index: Path, new_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = batcher._embed_stacked
    embedding = threading.Event()

    def slow(embedder, pixels):  # the service's embedding only: long enough for a switch and a reload
        embedding.set()
        time.sleep(3.0)
        return original(embedder, pixels)

    def add_during(base: str, change) -> httpx.Response:
        embedding.clear()
        answers: list[httpx.Response] = []
        files = [("images", ("a.png", image_bytes(make_image(5, 120)), "image/png"))]
        sender = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{base}/items", files=files, data={"labels": "x"}, headers=KEY, timeout=60)
            )
        )
        sender.start()
        embedding.wait(30)
        change()
        assert httpx.post(f"{base}/admin/reload", headers=KEY, timeout=60).status_code == 200
        sender.join()
        return answers[0]

    api.rebuild_index(fresh_index, new_model, switch=False)  # ready beside the live index
    with running_server(fresh_index) as base:
        monkeypatch.setattr(batcher, "_embed_stacked", slow)
        kept = add_during(base, lambda: None)  # a reload of the same model: the add goes through
        assert kept.status_code == 201, kept.text
        refused = add_during(base, lambda: api.switch_index(fresh_index))  # another model: embed again
        assert refused.status_code == 409 and "another model" in refused.json()["detail"]


@pytest.mark.parametrize("attempts", [service_state.SWITCH_ATTEMPTS, 1])
def test_a_reload_raced_by_a_switch_loads_the_new_generation_or_says_retry(
    attempts: int, fresh_index: Path, new_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The switch's renames land between the model's load and the index's (issue 44: 1 reload in 12 was a
    503 advising --force): the reload loads again, or, when it keeps losing, answers a 503 to retry."""
    api.rebuild_index(fresh_index, new_model, switch=False)
    opened = service_state.open_store
    switched = []

    def switch_then_open(index_dir: Path, **kwargs):
        if not switched:
            switched.append(api.switch_index(fresh_index))
        return opened(index_dir, **kwargs)

    with serving_client(fresh_index) as client:
        monkeypatch.setattr(service_state, "open_store", switch_then_open)
        monkeypatch.setattr(service_state, "SWITCH_ATTEMPTS", attempts)
        answer = client.post("/admin/reload", headers=KEY)
        ready = client.get("/readyz").json()
    assert switched and switched[0].switched
    if attempts > 1:
        assert answer.status_code == 200, answer.text
        assert ready["model_sha256"] == OnnxEmbedder(new_model).model_sha256
    else:
        assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
        assert "retry the reload" in answer.json()["detail"] and "--force" not in answer.json()["detail"]
        assert ready["model_sha256"] != OnnxEmbedder(new_model).model_sha256  # the old generation serves
