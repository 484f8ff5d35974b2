"""``retrieval eval --neighbours FILE``, and the warning when an evaluation includes training classes."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.model_manifest import ModelManifest, manifest_json
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict
from retrieval.indexing.store.build.builder import build_index

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def expected_neighbours(paths: list[Path], labels: list[str], model_dir: Path, k: int) -> list[tuple]:
    """Brute force, same-set protocol: every image queries all the others."""
    vectors = OnnxEmbedder(model_dir).embed_paths(paths, progress=False).embeddings
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    rows = []
    for q in range(len(paths)):
        for rank, n in enumerate(np.argsort(-similarity[q], kind="stable")[:k], start=1):
            rows.append(
                (str(paths[q]), labels[q], rank, str(paths[n]), labels[n], similarity[q, n], labels[q] == labels[n])
            )
    return rows


def test_model_eval_writes_every_querys_neighbours_as_csv(
    tiny_model_dir: Path, gallery_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    out = tmp_path / "neighbours.csv"
    result = invoke(
        "eval", "--model", tiny_model_dir, "--data", gallery_dir, "--split", "all", "--out", tmp_path / "eval",
        "--grid", 0, "--neighbours", out, "--neighbours-k", 3,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "top 3 results of each of 30 queries" in result.output
    rows = list(csv.DictReader(open(out, newline="")))
    assert list(rows[0]) == [
        "query_path", "query_label", "rank", "neighbour_path", "neighbour_label", "score", "correct",
    ]  # fmt: skip
    expected = expected_neighbours(
        [r.path for r in gallery_records], [r.label for r in gallery_records], tiny_model_dir, 3
    )
    assert len(rows) == len(expected) == 90
    for row, (query, q_label, rank, found, f_label, score, correct) in zip(rows, expected):
        assert (row["query_path"], row["query_label"], int(row["rank"])) == (query, q_label, rank)
        assert (row["neighbour_path"], row["neighbour_label"]) == (found, f_label)
        assert float(row["score"]) == pytest.approx(score, abs=1e-5)
        assert row["correct"] == str(correct)
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    p_at_1 = np.mean([row["correct"] == "True" for row in rows if row["rank"] == "1"])
    assert metrics["float"]["precision_at_1"] == pytest.approx(p_at_1)  # the file agrees with the metrics


def test_index_eval_writes_parquet_with_item_ids(
    tiny_model_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    build_index(tiny_model_dir, gallery_records, tmp_path / "index", progress=False)
    out = tmp_path / "neighbours.parquet"
    result = invoke("eval", "--index", tmp_path / "index", "--out", tmp_path / "eval", "--grid", 0, "--neighbours", out)
    assert result.exit_code == 0, result.output
    table = pq.read_table(out).to_pylist()
    assert len(table) == 30 * 10 and set(table[0]) >= {"query_id", "neighbour_id", "score", "correct"}
    expected = expected_neighbours(
        [r.path for r in gallery_records], [r.label for r in gallery_records], tiny_model_dir, 10
    )
    assert [(r["query_path"], r["rank"], r["neighbour_path"]) for r in table] == [(e[0], e[2], e[3]) for e in expected]
    assert all(r["query_id"] != r["neighbour_id"] for r in table)
    np.testing.assert_allclose([r["score"] for r in table], [e[5] for e in expected], atol=2e-3)  # float16 copies


def with_training_classes(model_dir: Path, target: Path, classes: list[str]) -> Path:
    shutil.copytree(model_dir, target)
    manifest = ModelManifest.load(target).model_copy(update={"training_classes": classes})
    (target / "model.json").write_text(manifest_json(manifest))
    return target


def test_evaluating_training_classes_warns(
    tiny_model_dir: Path, gallery_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    model = with_training_classes(tiny_model_dir, tmp_path / "model", ["class_0", "class_1", "class_2"])
    build_index(model, gallery_records, tmp_path / "all", progress=False)  # every class, as `--split all` would
    result = invoke("eval", "--index", tmp_path / "all", "--out", tmp_path / "e1", "--grid", 0)
    assert result.exit_code == 0, result.output
    assert "warning: 3 of the 6 evaluated classes were training classes of the model (class_0, class_1, class_2)" in (
        result.output
    )
    assert json.loads((tmp_path / "e1" / "metrics.json").read_text())["training_classes_evaluated"] == 3
    result = invoke("eval", "--model", model, "--data", gallery_dir, "--out", tmp_path / "e2", "--grid", 0)
    assert result.exit_code == 0 and "warning" not in result.output  # --split test: classes 3..5 only
    assert json.loads((tmp_path / "e2" / "metrics.json").read_text())["training_classes_evaluated"] == 0


def test_an_untrained_models_classes_are_no_training_classes(
    tiny_model_dir: Path, gallery_records: list[ImageRecord], tmp_path: Path
) -> None:
    model = with_training_classes(tiny_model_dir, tmp_path / "model", ["class_0", "class_1", "class_2"])
    untrained = TrainingVerdict(sentence="no training epoch ran", decision="no-training", best_epoch=0)
    manifest = ModelManifest.load(model).model_copy(update={"verdict": untrained})
    (model / "model.json").write_text(manifest_json(manifest))
    build_index(model, gallery_records, tmp_path / "all", progress=False)
    result = invoke("eval", "--index", tmp_path / "all", "--out", tmp_path / "e", "--grid", 0)
    assert result.exit_code == 0, result.output
    assert "were training classes" not in result.output  # --epochs 0: no weight saw a label
    assert json.loads((tmp_path / "e" / "metrics.json").read_text())["training_classes_evaluated"] == 0
