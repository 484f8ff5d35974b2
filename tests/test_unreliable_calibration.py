"""An unreliable calibration (too few validation classes) says so on every response whose hits carry its
probabilities, through every door (Python API, CLI, HTTP form and JSON POST /search, the similar routes), with
one more warning when min_probability cuts on it (issue 54, finding 16: two validation classes gave every hit
at least 0.54 and the HTTP warnings stayed empty)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from index_fixtures import export_tiny_model, make_gallery, make_image
from serving_fixtures import API_KEY, query_png, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.score_calibration import (
    CalibrationCurve,
    CalibrationFit,
    LogitInterval,
    ScoreCalibration,
)
from retrieval.indexing.exported_model.model_manifest import ModelManifest, manifest_json
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.usecases import search

LINE = CalibrationCurve(method="logistic", scores=[-1.0, 1.0], probabilities=[0.54, 0.99])
WIDTH = LogitInterval(classes=2, covariance=[[1.0, 0.0], [0.0, 0.5]], multiplier=12.706)
UNRELIABLE = ScoreCalibration(
    curves={"float": LINE, "binary": LINE},
    fitted_on=CalibrationFit(classes=2, queries=10, pairs=100, same_class_pairs=40),
    reliable=False,
    sentence="unreliable calibration: it rests on 2 validation classes",
    interval={"float": WIDTH, "binary": WIDTH},
)
PROBABILITIES = "the probabilities are unreliable: the calibration rests on 2 validation classes"
CUT = "min_probability 0.6 cuts on an unreliable calibration"


def _index(root: Path, calibration: ScoreCalibration) -> Path:
    model_dir = export_tiny_model(root / "export")
    manifest = ModelManifest.load(model_dir).model_copy(update={"calibration": calibration})
    (model_dir / "model.json").write_text(manifest_json(manifest))
    build_index(model_dir, make_gallery(root / "gallery"), root / "index", progress=False)
    return root / "index"


@pytest.fixture(scope="module")
def unreliable_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _index(tmp_path_factory.mktemp("unreliable"), UNRELIABLE)


@pytest.fixture(scope="module")
def query_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("query") / "query.png"
    make_image(0, 99).save(path)
    return path


def _has(found: list[str], *sentences: str) -> bool:
    return all(any(warning.startswith(sentence) for warning in found) for sentence in sentences)


def test_the_python_api_warns_and_says_how_wide_a_probability_is(unreliable_index: Path, query_file: Path) -> None:
    with pytest.warns(UserWarning) as caught:
        search(unreliable_index, query_file, k=3)
    (shown,) = [str(w.message) for w in caught if PROBABILITIES in str(w.message)]
    assert "anywhere from" in shown
    with pytest.warns(UserWarning) as cut:
        search(unreliable_index, query_file, k=3, min_probability=0.6)
    assert _has([str(w.message) for w in cut], PROBABILITIES, CUT)


def test_the_cli_prints_the_warning(unreliable_index: Path, query_file: Path) -> None:
    result = CliRunner().invoke(app, ["search", str(unreliable_index), str(query_file), "--k", "3", "--json"])
    assert result.exit_code == 0 and f"warning: {PROBABILITIES}" in result.stderr
    json.loads(result.stdout)  # the warning stays off stdout
    cut = CliRunner().invoke(app, ["search", str(unreliable_index), str(query_file), "--min-probability", "0.6"])
    assert f"warning: {CUT}" in cut.stderr


def test_every_http_search_door_carries_the_warning(unreliable_index: Path) -> None:
    with serving_client(unreliable_index) as client:
        files = {"image": ("q.png", query_png(), "image/png")}
        form = client.post("/search", files=files, data={"k": "3"}).json()
        assert _has(form["warnings"], PROBABILITIES) and form["results"][0]["probability"] is not None
        cut = client.post("/search", files=files, data={"k": "3", "min_probability": "0.6"}).json()
        assert _has(cut["warnings"], PROBABILITIES, CUT)
        vector = client.post("/embed", files=files).json()["embedding"]
        by_json = client.post("/search", json={"vector": vector, "k": 3, "min_probability": 0.6}).json()
        assert _has(by_json["warnings"], PROBABILITIES, CUT)
        similar = client.get("/items/1/similar?k=3").json()
        assert _has(similar["warnings"], PROBABILITIES)
        expanded = client.get("/items/1/similar?k=3&postprocess=qe").json()  # no probability shown: no warning
        assert not _has(expanded["warnings"], PROBABILITIES)
        deleting = client.post(
            "/items/delete", json={"filter": {"label": "class_1"}, "dry_run": True}, headers={"X-API-Key": API_KEY}
        )
        assert deleting.status_code == 200 and deleting.json()["warnings"] == []  # a delete shows no probability


def test_a_reliable_calibration_adds_no_warning(tmp_path: Path, query_file: Path) -> None:
    reliable = UNRELIABLE.model_copy(
        update={
            "reliable": True,
            "fitted_on": CalibrationFit(classes=20, queries=100, pairs=1000, same_class_pairs=300),
        }
    )
    index = _index(tmp_path, reliable)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search(index, query_file, k=3, min_probability=0.6)
    with serving_client(index) as client:
        assert client.get("/items/1/similar?k=3&min_probability=0.6").json()["warnings"] == []
