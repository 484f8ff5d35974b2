"""``retrieval index build|info|add|remove`` and ``retrieval search`` through the real CLI app."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from index_fixtures import make_image
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import (
    ConfigError,
    DataError,
    IndexFormatError,
    ItemNotFoundError,
    KeyConflictError,
)
from retrieval.indexing.store.files.index_store import IndexStore

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=True)


@pytest.fixture(scope="module")
def run_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A training run directory whose export/ holds the model (the CLI accepts either)."""
    run = tmp_path_factory.mktemp("run")
    shutil.copytree(tiny_model_dir, run / "export")
    return run


@pytest.fixture(scope="module")
def cli_index(run_dir: Path, gallery_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "index"
    result = invoke(
        "index",
        "build",
        "--model",
        run_dir,
        "--data",
        gallery_dir,
        "--out",
        out,
        "--float-kind",
        "hnsw",
        "--binary-kind",
        "ivf",
        "--batch-size",
        8,
        "--threads",
        1,
    )
    assert result.exit_code == 0, result.output
    assert "indexed 30 images of 6 classes" in result.output
    return out


def test_build_writes_a_self_contained_index(cli_index: Path, run_dir: Path) -> None:
    manifest = json.loads((cli_index / "manifest.json").read_text())
    assert (manifest["float_kind"], manifest["binary_kind"], manifest["count"]) == ("hnsw", "ivf", 30)
    assert manifest["model_dir"] == str((run_dir / "export").resolve())
    assert (cli_index / "model" / "model.onnx").read_bytes() == (run_dir / "export" / "model.onnx").read_bytes()
    info = invoke("index", "info", cli_index)
    assert info.exit_code == 0 and "30 (6 classes)" in info.output and "float hnsw, binary ivf" in info.output


def test_search_prints_the_query_image_first(cli_index: Path, gallery_dir: Path) -> None:
    query = gallery_dir / "class_2" / "img_3.png"
    for extra in ([], ["--binary", "--rerank", "10"]):
        result = invoke("search", cli_index, query, "-k", 3, *extra)
        assert result.exit_code == 0, result.output
        lines = result.output.strip().splitlines()
        assert lines[0].split() == ["rank", "id", "score", "label", "path"] and len(lines) == 4
        assert lines[1].split()[3:] == ["class_2", str(query)]
        assert float(lines[1].split()[2]) == pytest.approx(1.0, abs=2e-3)


def test_search_works_when_the_original_export_is_gone(cli_index: Path, gallery_dir: Path, tmp_path: Path) -> None:
    moved = tmp_path / "index"
    shutil.copytree(cli_index, moved)
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest["model_dir"] = str(tmp_path / "deleted-export")
    (moved / "manifest.json").write_text(json.dumps(manifest))
    result = invoke("search", moved, gallery_dir / "class_0" / "img_0.png", "-k", 1, "--binary")
    assert result.exit_code == 0 and "class_0" in result.output


def test_add_then_remove(cli_index: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    shutil.copytree(cli_index, index)
    extra = tmp_path / "extra"
    (extra / "class_9").mkdir(parents=True)
    for item in range(2):
        make_image(5, 20 + item).save(extra / "class_9" / f"x{item}.png")
    (extra / "class_9" / "broken.png").write_bytes(b"\x89PNG nope")
    added = invoke("index", "add", index, "--data", extra)
    assert added.exit_code == 0, added.output
    assert "added 2 images (ids 31..32); the index now holds 32" in added.output
    assert "skipped 1 unreadable image(s)" in added.output and "broken.png" in added.output
    refused = invoke("index", "remove", index, 31, 5, 400)
    assert isinstance(refused.exception, ItemNotFoundError) and refused.exit_code != 0
    message = str(refused.exception)
    assert "1 of the ids are not in" in message and "(400); nothing was removed" in message
    with IndexStore.open(index) as store:
        assert store.count == 32  # an unknown id removes nothing, not even the known ones
    removed = invoke("index", "remove", index, 31, 5)
    assert "removed 2 item(s); the index now holds 30" in removed.output
    with IndexStore.open(index) as store:
        assert 31 not in store.ids() and 32 in store.ids() and 5 not in store.ids()


def test_errors_are_one_sentence(cli_index: Path, gallery_dir: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    cases = [
        (
            ("index", "build", "--model", tmp_path, "--data", gallery_dir, "--out", tmp_path / "i"),
            ConfigError,
            "run `retrieval export",
        ),
        (
            (
                "index",
                "build",
                "--model",
                tiny_model_dir,
                "--data",
                gallery_dir,
                "--out",
                tmp_path / "i",
                "--float-kind",
                "lsh",
            ),
            ConfigError,
            "known kinds: flat, hnsw, ivf, ivfpq",
        ),
        (("index", "info", tmp_path), IndexFormatError, "manifest.json is missing"),
        (("search", cli_index, tmp_path / "none.jpg"), DataError, "cannot read image"),
        (("search", cli_index, gallery_dir / "class_0" / "img_0.png", "--rerank", "5"), DataError, "needs kind binary"),
    ]
    for args, error_type, fragment in cases:
        result = invoke(*args)
        assert isinstance(result.exception, error_type), (args, result.output)
        assert fragment in str(result.exception)
    assert not (tmp_path / "i").exists()


def test_console_script_prints_no_traceback(tmp_path: Path) -> None:
    code = "import sys; from retrieval.cli.main import main; sys.argv = ['retrieval', 'index', 'info', sys.argv[1]]; main()"
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: ") and "Traceback" not in done.stderr


def test_a_keys_file_stores_keys_in_nfc_and_refuses_an_invisible_one(cli_index: Path, tmp_path: Path) -> None:
    index = Path(shutil.copytree(cli_index, tmp_path / "index"))
    extra = tmp_path / "extra"
    (extra / "class_9").mkdir(parents=True)
    make_image(5, 40).save(extra / "class_9" / "x0.png")
    keys = tmp_path / "keys.csv"
    keys.write_text("path,key\nextra/class_9/x0.png,\u200b\n", encoding="utf-8")
    invisible = invoke("index", "add", index, "--data", extra, "--keys", keys)
    assert isinstance(invisible.exception, DataError) and "is blank" in str(invisible.exception)
    keys.write_text(f"path,key\nextra/class_9/x0.png,{unicodedata.normalize('NFD', 'café')}\n", encoding="utf-8")
    assert invoke("index", "add", index, "--data", extra, "--keys", keys).exit_code == 0
    with IndexStore.open(index) as store:
        assert store.item_by_key(unicodedata.normalize("NFC", "café")).key == unicodedata.normalize("NFC", "café")
    gone = invoke("index", "remove", index, "--key", unicodedata.normalize("NFC", "café"))
    assert "removed 1 item(s)" in gone.output, gone.output


def test_add_with_keys_refuses_a_key_in_use_and_replaces_with_replace(cli_index: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    shutil.copytree(cli_index, index)
    extra = tmp_path / "extra"
    (extra / "class_9").mkdir(parents=True)
    for item in range(2):
        make_image(5, 30 + item).save(extra / "class_9" / f"x{item}.png")
    keys = tmp_path / "keys.csv"
    keys.write_text(f"path,key\nextra/class_9/x0.png,sku-0\n{extra / 'class_9' / 'x1.png'},sku-1\n")
    added = invoke("index", "add", index, "--data", extra, "--keys", keys)
    assert "added 2 images (ids 31..32); the index now holds 32" in added.output, added.output
    again = invoke("index", "add", index, "--data", extra, "--keys", keys)
    assert isinstance(again.exception, KeyConflictError) and 'the key "sku-0" is already item 31' in str(
        again.exception
    )
    replaced = invoke("index", "add", index, "--data", extra, "--keys", keys, "--replace")
    assert "(ids 31..32), replacing 2 keyed item(s); the index now holds 32" in replaced.output, replaced.output
    with IndexStore.open(index) as store:  # a replaced item keeps its id
        assert store.ids_of_keys(["sku-0", "sku-1"]) == {"sku-0": 31, "sku-1": 32}
    (extra / "manifest.csv").write_text("path,label,key,shop\nclass_9/x0.png,class_9,from-csv,berlin\n")
    from_csv = invoke("index", "add", index, "--data", extra / "manifest.csv")
    assert from_csv.exit_code == 0, from_csv.output
    with IndexStore.open(index) as store:
        item = store.item_by_key("from-csv")
        assert (item.id, item.metadata) == (33, {"shop": "berlin"})
    keys.write_text("path,key\nextra/class_9/nothing.png,sku-9\n")
    stray = invoke("index", "add", index, "--data", extra / "manifest.csv", "--keys", keys)
    assert isinstance(stray.exception, DataError) and "not among the images added" in str(stray.exception)
    unknown = invoke("index", "remove", index, "--key", "sku-0", "--key", "nope")
    assert isinstance(unknown.exception, ItemNotFoundError)
    assert "no item carries the key 'nope'" in str(unknown.exception)
    removed = invoke("index", "remove", index, "--key", "sku-0", "--key", "from-csv", 1)
    assert "removed 3 item(s); the index now holds 30" in removed.output, removed.output
    nothing = invoke("index", "remove", index)
    assert isinstance(nothing.exception, ConfigError) and "their ids, or --key KEY" in str(nothing.exception)
