"""``retrieval eval``: metrics.json structure and values, both protocols, as-built index evaluation, grid."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from index_fixtures import make_image
from PIL import Image
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.evaluation import as_built_metrics, exact_metrics, index_data
from retrieval.indexing.eval.metrics import default_recall_ks
from retrieval.indexing.eval.retrieval_grid import HIT, MISS, GridRow, render_grid
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.store.files.index_store import IndexStore

runner = CliRunner()
METRIC_KEYS = {"map_at_r", "r_precision", "precision_at_1", "nmi", "recall_at_k", "num_queries"}


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def brute_force_p_at_1(
    queries: np.ndarray, q_labels: list[str], gallery: np.ndarray, g_labels: list[str], same_set: bool
) -> float:
    similarity = queries @ gallery.T
    if same_set:
        np.fill_diagonal(similarity, -np.inf)
    return float(np.mean([q_labels[i] == g_labels[j] for i, j in enumerate(similarity.argmax(axis=1))]))


def test_eval_model_same_set(
    tiny_model_dir: Path, gallery_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    result = invoke(
        "eval",
        "--model",
        tiny_model_dir,
        "--data",
        gallery_dir,
        "--split",
        "all",
        "--out",
        out,
        "--ks",
        "1,2,4",
        "--grid",
        3,
    )
    assert result.exit_code == 0, result.output
    assert "Recall@4" in result.output and "same-set protocol, 30 queries" in result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert METRIC_KEYS <= set(metrics["float"]) and METRIC_KEYS <= set(metrics["binary"])
    assert set(metrics["float"]["recall_at_k"]) == {"1", "2", "4"}
    assert (metrics["protocol"], metrics["num_queries"], metrics["source"]) == ("same-set", 30, "model")
    embeddings = OnnxEmbedder(tiny_model_dir).embed_paths([r.path for r in gallery_records], progress=False).embeddings
    labels = [r.label for r in gallery_records]
    expected = brute_force_p_at_1(embeddings, labels, embeddings, labels, same_set=True)
    assert metrics["float"]["precision_at_1"] == pytest.approx(expected)
    assert metrics["float"]["recall_at_k"]["1"] == pytest.approx(expected)
    with Image.open(out / "retrieval_grid.png") as grid:
        assert grid.size[1] > grid.size[0] / 9 * 3 * 0.8  # 3 rows of 1 query + 8 neighbours


def test_eval_says_how_many_queries_no_metric_could_measure(
    tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(gallery_dir, data)
    (data / "solo").mkdir()
    make_image(9, 0).save(data / "solo" / "0.png")  # alone in its class: nothing to retrieve
    result = invoke("eval", "--model", tiny_model_dir, "--data", data, "--split", "all", "--out", tmp_path / "eval")
    assert result.exit_code == 0, result.output
    assert "same-set protocol, 31 queries (1 left out: no other image of their class to retrieve)" in result.output
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["num_queries"] == 31 and metrics["float"]["num_queries"] == 30


def test_eval_model_query_gallery_protocol(
    tiny_model_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    csv_path = tmp_path / "manifest.csv"
    with open(csv_path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "label", "is_query", "is_gallery"])
        for record in gallery_records:
            is_query = record.path.stem in ("img_0", "img_1")
            writer.writerow([record.path, record.label, int(is_query), int(not is_query)])
    out = tmp_path / "eval"
    result = invoke("eval", "--model", tiny_model_dir, "--data", csv_path, "--split", "all", "--out", out, "--grid", 0)
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["protocol"], metrics["num_queries"], metrics["num_gallery"]) == ("query-gallery", 12, 18)
    assert not (out / "retrieval_grid.png").exists()
    embedder = OnnxEmbedder(tiny_model_dir)
    queries = [r for r in gallery_records if r.path.stem in ("img_0", "img_1")]
    gallery = [r for r in gallery_records if r.path.stem not in ("img_0", "img_1")]
    q = embedder.embed_paths([r.path for r in queries], progress=False).embeddings
    g = embedder.embed_paths([r.path for r in gallery], progress=False).embeddings
    expected = brute_force_p_at_1(q, [r.label for r in queries], g, [r.label for r in gallery], same_set=False)
    assert metrics["float"]["precision_at_1"] == pytest.approx(expected)


@pytest.mark.parametrize("flags", ["same-set", "query-gallery"])
def test_as_built_search_of_a_flat_index_equals_exact(
    flags: str, tiny_model_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    records = [
        ImageRecord(
            r.path,
            r.label,
            is_query=flags == "same-set" or r.path.stem < "img_2",
            is_gallery=flags == "same-set" or r.path.stem >= "img_2",
        )
        for r in gallery_records
    ]
    build_index(tiny_model_dir, records, tmp_path / "index", progress=False)
    with IndexStore.open(tmp_path / "index") as store:
        data = index_data(store)
        assert data.protocol == flags
        exact = exact_metrics(data, (1, 2, 4))
        for kind in ("float", "binary"):
            built = as_built_metrics(store, data, (1, 2, 4), kind)
            assert built.map_at_r == pytest.approx(exact[kind].map_at_r, abs=1e-6)
            assert built.recall_at_k == pytest.approx(exact[kind].recall_at_k, abs=1e-6)


def test_eval_index_reports_as_built_and_exact(
    tiny_model_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    build_index(
        tiny_model_dir, gallery_records, tmp_path / "index", float_kind="hnsw", binary_kind="ivf", progress=False
    )
    out = tmp_path / "eval"
    result = invoke("eval", "--index", tmp_path / "index", "--out", out, "--grid", 2)
    assert result.exit_code == 0, result.output
    assert "float (exact)" in result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["exact"]) == {"float", "binary"} and metrics["float_kind"] == "hnsw"
    # no --ks: the dataset default for 6 classes of 5 (small classes: the SOP-style 1, 10, ... up to the gallery size)
    assert set(metrics["float"]["recall_at_k"]) == {str(k) for k in default_recall_ks(6, 30)} == {"1", "10"}
    # 30 items: HNSW and one-list IVF search everything, so as built equals exact
    assert metrics["float"]["map_at_r"] == pytest.approx(metrics["exact"]["float"]["map_at_r"], abs=1e-6)
    assert metrics["binary"]["precision_at_1"] == pytest.approx(metrics["exact"]["binary"]["precision_at_1"])
    assert (out / "retrieval_grid.png").is_file()


def test_grid_frames_hits_green_and_misses_red(tmp_path: Path) -> None:
    paths = []
    for n in range(3):
        paths.append(tmp_path / f"{n}.png")
        make_image(n, 0).save(paths[-1])
    grid = render_grid(
        [GridRow(paths[0], "a", [(paths[1], "a"), (paths[2], "b"), (tmp_path / "gone.png", "a")])], thumb=20
    )
    pixels = np.asarray(grid)
    cell = 20 + 2 * 4 + 6  # thumb + frame + gap
    assert tuple(pixels[8, 6 + cell + 1]) == HIT
    assert tuple(pixels[8, 6 + 2 * cell + 1]) == MISS
    assert tuple(pixels[8, 6 + 3 * cell + 1]) == HIT  # an unreadable result still gets its frame


def test_eval_argument_errors(tmp_path: Path, tiny_model_dir: Path) -> None:
    for args in (["eval"], ["eval", "--model", tiny_model_dir], ["eval", "--index", tmp_path, "--model", tmp_path]):
        result = invoke(*args)
        assert isinstance(result.exception, ConfigError) and "either --model" in str(result.exception)
    result = invoke("eval", "--index", tmp_path, "--ks", "1,x")
    assert isinstance(result.exception, ConfigError) and "--ks must be" in str(result.exception)
