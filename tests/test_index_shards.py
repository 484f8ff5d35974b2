"""``retrieval index build --shard I/N`` + ``retrieval index merge``: 3 shards merged equal one build.

Equal means the same items under the same ids, the same stored vectors and the same search results
(float and binary) as one unsharded ``index build`` of the same folder, unreadable images included.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest
from index_fixtures import export_tiny_model
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.build.shards import ShardSpec, item_key, parse_shard, shard_of
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.shared.items.items_db import ItemsDb

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=True)


def build(model: Path, data: Path, out: Path, *extra: object) -> None:
    result = invoke("index", "build", "--model", model, "--data", data, "--out", out, "--threads", 1, "--quiet", *extra)
    assert result.exit_code == 0, result.output
    assert result.exception is None


@pytest.fixture(scope="module")
def data(gallery_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 30-image gallery plus one unreadable image (skipped alike by one build and by its shard)."""
    root = tmp_path_factory.mktemp("sharded") / "data"
    shutil.copytree(gallery_dir, root)
    (root / "class_2" / "broken.png").write_bytes(b"not an image")
    return root


@pytest.fixture(scope="module")
def shards(tiny_model_dir: Path, data: Path) -> list[Path]:
    out = data.parent / "shards"
    for index in range(3):
        build(tiny_model_dir, data, out / str(index), "--shard", f"{index}/3", "--batch-size", 4)
    return [out / str(index) for index in range(3)]


def test_three_shards_merged_equal_one_build(tiny_model_dir: Path, data: Path, shards: list[Path]) -> None:
    full, merged = data.parent / "full", data.parent / "merged"
    build(tiny_model_dir, data, full)
    result = invoke("index", "merge", merged, shards[2], shards[0], shards[1])  # any order of arguments
    assert result.exit_code == 0, result.output
    assert "merged 3 shards: 30 images of 6 classes" in result.output and "1 unreadable" in result.output

    with IndexStore.open(full) as one, IndexStore.open(merged) as many:
        assert many.all_items() == one.all_items()  # ids, paths, labels, metadata and rows
        ids = one.ids()
        assert ids.tolist() == list(range(1, 31))
        np.testing.assert_array_equal(many.embeddings_of(ids), one.embeddings_of(ids))
        queries = np.asarray(one.embeddings_of(ids), dtype=np.float32)
        for kind in ("float", "binary"):
            expected, got = one.search(queries, 10, kind=kind), many.search(queries, 10, kind=kind)
            np.testing.assert_array_equal(got.ids, expected.ids)
            np.testing.assert_allclose(got.scores, expected.scores, rtol=0, atol=1e-6)
        assert many.manifest.model_sha256 == one.manifest.model_sha256
        assert many.manifest.model_dir == one.manifest.model_dir


def test_shards_keep_the_keys_of_a_csv_manifest(tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path) -> None:
    images = sorted(gallery_dir.glob("*/*.png"))[:6]
    rows = [f"{path},{path.parent.name},{f'k{i}' if i % 2 else ''}" for i, path in enumerate(images)]
    (tmp_path / "manifest.csv").write_text("path,label,key\n" + "\n".join(rows) + "\n")
    for index in range(2):
        build(tiny_model_dir, tmp_path / "manifest.csv", tmp_path / "shards" / str(index), "--shard", f"{index}/2")
    merged = invoke("index", "merge", tmp_path / "merged", tmp_path / "shards" / "0", tmp_path / "shards" / "1")
    assert merged.exit_code == 0, merged.output
    with IndexStore.open(tmp_path / "merged") as store:
        assert [item.key for item in store.all_items()] == [None, "k1", None, "k3", None, "k5"]


@pytest.mark.skipif(importlib.util.find_spec("milvus_lite") is None, reason="needs the milvus extra")
def test_shards_bulk_inserted_into_milvus_equal_one_milvus_build(
    tiny_model_dir: Path, data: Path, shards: list[Path]
) -> None:
    db = data.parent / "milvus.db"
    full, merged = data.parent / "milvus_full", data.parent / "milvus_merged"
    build(tiny_model_dir, data, full, "--backend", "milvus", "--milvus-uri", db, "--collection", "full")
    milvus = ("--backend", "milvus", "--milvus-uri", db, "--collection", "merged")
    result = invoke("index", "merge", merged, *shards, *milvus)
    assert result.exit_code == 0, result.output
    assert "merged 3 shards: 30 images of 6 classes" in result.output and "Milvus collection merged" in result.output
    with open_store(full) as one, open_store(merged) as many:
        assert many.manifest.backend == "milvus" and many.manifest.milvus_collection == "merged"
        assert many.all_items() == one.all_items()
        ids = one.ids()
        np.testing.assert_array_equal(many.embeddings_of(ids), one.embeddings_of(ids))
        queries = np.asarray(one.embeddings_of(ids), dtype=np.float32)
        for kind in ("float", "binary"):
            expected, got = one.search(queries, 10, kind=kind), many.search(queries, 10, kind=kind)
            np.testing.assert_allclose(got.scores, expected.scores, rtol=0, atol=1e-6)
            np.testing.assert_array_equal(got.ids[:, 0], expected.ids[:, 0])


def test_each_shard_holds_the_items_its_keys_assign_it(data: Path, shards: list[Path]) -> None:
    keys = []
    for index, shard_dir in enumerate(shards):
        db = ItemsDb.open(shard_dir / "items.sqlite")
        try:
            shard_keys = [item_key(Path(item.path), data.resolve()) for item in db.all_items()]
        finally:
            db.close()
        assert shard_keys and all(shard_of(key, 3) == index for key in shard_keys)
        keys += shard_keys
    assert len(keys) == len(set(keys)) == 30  # every readable image in exactly one shard


def test_assignment_depends_on_the_relative_path_only(tmp_path: Path) -> None:
    names = [f"class_{c}/img_{i}.png" for c in range(5) for i in range(20)]
    here, there = tmp_path / "a" / "data", tmp_path / "mnt" / "other"
    keys_here = [item_key(here / name, here.resolve()) for name in names]
    keys_there = [item_key(there / name, there.resolve()) for name in reversed(names)]
    assert keys_here == names and sorted(keys_there) == sorted(names)
    assert {k: shard_of(k, 4) for k in keys_here} == {k: shard_of(k, 4) for k in keys_there}
    assert set(shard_of(k, 4) for k in keys_here) == {0, 1, 2, 3}  # spread over every shard


@pytest.mark.parametrize("text", ["3/3", "-1/3", "a/b", "1/0", "2", "1/2/3", ""])
def test_bad_shard_specs_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--shard"):
        parse_shard(text)


def test_a_shard_spec_counts_from_zero() -> None:
    assert parse_shard("0/1") == ShardSpec(0, 1) and parse_shard(" 7 / 8 ") == ShardSpec(7, 8)


def test_build_refuses_a_bad_shard_spec(tiny_model_dir: Path, data: Path, tmp_path: Path) -> None:
    result = invoke(
        "index", "build", "--model", tiny_model_dir, "--data", data, "--out", tmp_path / "s", "--shard", "3/3"
    )
    assert isinstance(result.exception, ConfigError) and "numbered 0 to 2" in str(result.exception)
    assert not (tmp_path / "s").exists()


def _refused(out: Path, *shard_dirs: Path) -> str:
    result = invoke("index", "merge", out, *shard_dirs)
    assert isinstance(result.exception, ConfigError), result.output
    assert not out.exists()  # nothing written
    return str(result.exception)


def test_merge_refuses_missing_and_duplicate_shards(shards: list[Path], tmp_path: Path) -> None:
    assert "1 of 3 shards are missing (2/3)" in _refused(tmp_path / "m", shards[0], shards[1])
    assert "shard 1/3 is given twice" in _refused(tmp_path / "m", shards[0], shards[1], shards[1], shards[2])


def test_merge_refuses_shards_of_another_model_or_count(
    tiny_model_dir: Path, data: Path, shards: list[Path], tmp_path: Path
) -> None:
    other_model = export_tiny_model(tmp_path / "other_model", seed=1)
    build(other_model, data, tmp_path / "other", "--shard", "2/3")
    assert "differ in their models" in _refused(tmp_path / "m", shards[0], shards[1], tmp_path / "other")
    build(tiny_model_dir, data, tmp_path / "halves", "--shard", "1/2")
    assert "differ in their shard counts" in _refused(tmp_path / "m", shards[0], tmp_path / "halves", shards[2])


def test_merge_refuses_a_changed_listing(tiny_model_dir: Path, data: Path, shards: list[Path], tmp_path: Path) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(data, changed)
    shutil.copy(data / "class_0" / "img_0.png", changed / "class_0" / "img_9.png")
    build(tiny_model_dir, changed, tmp_path / "late", "--shard", "2/3")
    assert "differ in their listings of the data" in _refused(tmp_path / "m", shards[0], shards[1], tmp_path / "late")


def test_merge_refuses_an_index_directory_as_a_shard(shards: list[Path], tmp_path: Path) -> None:
    index = tmp_path / "index"
    assert invoke("index", "merge", index, *shards).exit_code == 0
    assert "is an index directory" in _refused(tmp_path / "m", shards[0], shards[1], index)
