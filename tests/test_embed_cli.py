"""``retrieval embed``: embeddings with their ids, paths and labels, as Parquet or .npy + items.csv."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.files.index_store import IndexStore

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def reference(model_dir: Path, data: Path, split: str = "all"):
    records = select_split(load_records(data), split)
    embedder = OnnxEmbedder(model_dir)
    return records, embedder, embedder.embed_paths([r.path for r in records], progress=False).embeddings


def test_parquet_holds_each_image_with_its_embedding(tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")  # in the dev extra; the missing-package path is tested below
    out = tmp_path / "emb.parquet"
    result = invoke("embed", "--model", tiny_model_dir, "--data", gallery_dir, "--split", "test", "--out", out)
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    records, embedder, expected = reference(tiny_model_dir, gallery_dir, "test")
    assert len(records) == 15 and f"wrote 15 embeddings (64-d) to {out}" in result.output  # classes 3..5
    assert table.column_names == ["id", "path", "label", "split", "embedding"]
    assert table.column("id").to_pylist() == list(range(15))
    assert table.column("path").to_pylist() == [str(r.path) for r in records]
    assert table.column("label").to_pylist() == [r.label for r in records]
    vectors = np.array(table.column("embedding").to_pylist(), dtype=np.float32)
    np.testing.assert_array_equal(vectors, expected)
    assert table.schema.metadata[b"model_sha256"].decode() == embedder.model_sha256


def test_npy_with_a_sidecar_skips_unreadable_images(tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(gallery_dir, data)
    (data / "class_0" / "img_9.png").write_bytes(b"\x89PNG nope")  # sorts last in class_0: position 5
    out = tmp_path / "emb.npy"
    result = invoke("embed", "--model", tiny_model_dir, "--data", data, "--out", out)
    assert result.exit_code == 0, result.output
    assert "skipped 1 unreadable image(s)" in result.output and "emb.items.csv" in result.output
    records, _, _ = reference(tiny_model_dir, gallery_dir)
    vectors = np.load(out)
    rows = list(csv.DictReader(open(tmp_path / "emb.items.csv", newline="")))
    assert vectors.shape == (30, 64) and vectors.dtype == np.float32 and len(rows) == 30
    assert [int(r["id"]) for r in rows] == [0, 1, 2, 3, 4] + list(range(6, 31))  # id = position in the split
    assert rows[5]["path"] == str(data / "class_1" / "img_0.png") and rows[5]["label"] == "class_1"
    readable = [data / Path(r.path).relative_to(gallery_dir) for r in records]
    np.testing.assert_array_equal(
        vectors, OnnxEmbedder(tiny_model_dir).embed_paths(readable, progress=False).embeddings
    )


def test_an_index_exports_its_stored_embeddings_with_item_ids(tiny_index_template: Path, tmp_path: Path) -> None:
    out = tmp_path / "index.npy"
    assert invoke("embed", "--index", tiny_index_template, "--out", out).exit_code == 0
    rows = list(csv.DictReader(open(tmp_path / "index.items.csv", newline="")))
    with IndexStore.open(tiny_index_template) as store:
        ids = store.ids()
        np.testing.assert_array_equal(np.load(out), store.embeddings_of(ids))
        assert [int(r["id"]) for r in rows] == ids.tolist()
        assert [r["label"] for r in rows] == [store.item(int(i)).label for i in ids]


def test_a_missing_pyarrow_is_one_sentence_before_any_work(
    tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now raises ImportError
    out = tmp_path / "emb.parquet"
    result = invoke("embed", "--model", tiny_model_dir, "--data", gallery_dir, "--out", out)
    assert isinstance(result.exception, ConfigError)
    assert "needs pyarrow" in str(result.exception) and "pip install 'retrieval[parquet]'" in str(result.exception)
    assert not out.exists() and "embedding" not in result.output


def test_argument_errors(tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path) -> None:
    for args, fragment in [
        (("--model", tiny_model_dir, "--data", gallery_dir, "--out", tmp_path / "e.txt"), "name it *.parquet or *.npy"),
        (("--model", tiny_model_dir, "--out", tmp_path / "e.npy"), "either --model MODEL --data PATH"),
        (("--index", tmp_path, "--data", gallery_dir, "--out", tmp_path / "e.npy"), "either --model MODEL --data PATH"),
    ]:
        result = invoke("embed", *args)
        assert isinstance(result.exception, ConfigError) and fragment in str(result.exception), result.output
