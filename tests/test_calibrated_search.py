"""Every door shows each hit's probability and applies min_probability the same way, and a model without a
calibration refuses min_probability with one sentence.

The index's model carries a hand-made calibration: a straight line from 10 % at score -1 to 90 % at score 1, so
a hit's probability is 0.5 + 0.4 * score."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from index_fixtures import export_tiny_model, make_gallery, make_image
from serving_fixtures import query_png, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.score_calibration import (
    NO_CALIBRATION,
    CalibrationCurve,
    CalibrationFit,
    ScoreCalibration,
)
from retrieval.indexing.exported_model.model_manifest import ModelManifest, manifest_json
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.usecases import search
from retrieval.indexing.usecases.evaluating import EvalRequest, run_eval, save_evaluation

LINE = CalibrationCurve(method="isotonic", scores=[-1.0, 1.0], probabilities=[0.1, 0.9])
CALIBRATION = ScoreCalibration(
    curves={"float": LINE, "binary": LINE},
    fitted_on=CalibrationFit(classes=6, queries=30, pairs=100, same_class_pairs=20),
    reliable=True,
    sentence="calibrated by hand",
)


def _expected(score: float) -> float:
    return 0.5 + 0.4 * score


@pytest.fixture(scope="module")
def calibrated_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("calibrated")
    model_dir = export_tiny_model(root / "export")
    manifest = ModelManifest.load(model_dir).model_copy(update={"calibration": CALIBRATION})
    (model_dir / "model.json").write_text(manifest_json(manifest))
    build_index(model_dir, make_gallery(root / "gallery"), root / "index", progress=False)
    return root / "index"


@pytest.fixture(scope="module")
def query_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("query") / "query.png"
    make_image(0, 99).save(path)
    return path


def test_python_api_hits_carry_the_probability_and_the_cut_off_keeps_those_above_it(
    calibrated_index: Path, query_file: Path
) -> None:
    (hits,) = search(calibrated_index, query_file, k=10)
    assert all(hit.probability == pytest.approx(_expected(hit.score)) for hit in hits)
    item, score = hits[0]  # still a pair
    cut = 0.5 * (hits[2].probability + hits[3].probability)  # type: ignore[operator]
    (kept,) = search(calibrated_index, query_file, k=10, min_probability=cut)
    assert [hit.item.id for hit in kept] == [hit.item.id for hit in hits[:3]]
    assert (kept.below_min_score, kept.below_min_probability) == (0, 7)
    (binary,) = search(calibrated_index, query_file, k=3, kind="binary")
    assert all(hit.probability == pytest.approx(_expected(hit.score)) for hit in binary)
    (expanded,) = search(calibrated_index, query_file, k=3, postprocess="qe")
    assert all(hit.probability is None for hit in expanded)


def test_cli_shows_the_probability_and_applies_min_probability(calibrated_index: Path, query_file: Path) -> None:
    runner = CliRunner()
    table = runner.invoke(app, ["search", str(calibrated_index), str(query_file), "--k", "3"])
    assert table.exit_code == 0 and "same class" in table.output.splitlines()[0]
    result = runner.invoke(
        app, ["search", str(calibrated_index), str(query_file), "--k", "10", "--json", "--min-probability", "0.7"]
    )
    document = json.loads(result.stdout)
    hits = document["queries"][0]["results"]
    assert document["min_probability"] == 0.7 and hits
    assert all(
        hit["probability"] >= 0.7 and hit["probability"] == pytest.approx(_expected(hit["score"])) for hit in hits
    )
    assert document["queries"][0]["below_min_probability"] == 10 - len(hits)


def test_http_hits_carry_the_probability_and_the_form_cut_off_applies(calibrated_index: Path) -> None:
    with serving_client(calibrated_index) as client:
        body = client.post("/search", files={"image": ("q.png", query_png(), "image/png")}, data={"k": "10"}).json()
        assert all(hit["probability"] == pytest.approx(_expected(hit["score"])) for hit in body["results"])
        cut = body["results"][4]["probability"]
        response = client.post(
            "/search",
            files={"image": ("q.png", query_png(), "image/png")},
            data={"k": "10", "min_probability": str(cut)},
        )
        kept = response.json()
        assert kept["min_probability"] == pytest.approx(cut) and len(kept["results"]) >= 5
        assert all(hit["probability"] >= cut for hit in kept["results"])
        assert kept["below_min_probability"] == 10 - len(kept["results"])
        similar = client.get("/items/1/similar?k=5&min_probability=0.99").json()
        assert similar["results"] == [] and similar["below_min_probability"] == 5


def test_a_model_without_calibration_refuses_min_probability_in_every_door(
    tiny_index_template: Path, query_file: Path
) -> None:
    (hits,) = search(tiny_index_template, query_file, k=3)
    assert all(hit.probability is None for hit in hits)
    with pytest.raises(DataError, match="no calibration") as refused:
        search(tiny_index_template, query_file, k=3, min_probability=0.8)
    assert str(refused.value) == f"min_probability cannot be applied: {NO_CALIBRATION}"
    result = CliRunner().invoke(app, ["search", str(tiny_index_template), str(query_file), "--min-probability", "0.8"])
    assert isinstance(result.exception, DataError) and str(result.exception) == str(refused.value)  # main() prints it
    with serving_client(tiny_index_template) as client:
        response = client.post(
            "/search", files={"image": ("q.png", query_png(), "image/png")}, data={"min_probability": "0.8"}
        )
        assert response.status_code == 400 and "no calibration" in response.json()["detail"]
        assert client.get("/items/1/similar?min_probability=0.8").status_code == 400
        vector = client.post("/embed", files={"image": ("q.png", query_png(), "image/png")}).json()["embedding"]
        by_json = client.post("/search", json={"vector": vector, "min_probability": 0.8})
        assert by_json.status_code == 400 and by_json.json()["detail"] == f"{refused.value}."  # JSON was a 422
        auto = client.post("/search", json={"vector": vector, "cutoff": "auto"})
        assert auto.status_code == 400 and auto.json()["detail"] == f"cutoff=auto cannot be applied: {NO_CALIBRATION}."
    with pytest.raises(DataError, match=r"^cutoff=auto cannot be applied: "):
        search(tiny_index_template, query_file, k=3, cutoff="auto")


def test_min_probability_outside_0_to_1_is_refused(calibrated_index: Path, query_file: Path) -> None:
    with pytest.raises(DataError, match="min_probability must be between 0 and 1"):
        search(calibrated_index, query_file, min_probability=1.5)


def test_eval_reports_ece_and_cut_offs_on_the_evaluated_hits_and_draws_the_diagram(
    calibrated_index: Path, tmp_path: Path
) -> None:
    evaluation = run_eval(EvalRequest.of(index=calibrated_index, grid=0), progress=False)
    written = save_evaluation(evaluation, tmp_path)
    document = json.loads(written.metrics.read_text())["calibration"]
    assert document["available"] and written.calibration == tmp_path / "calibration.png"
    assert written.calibration.stat().st_size > 1000
    data = evaluation.data
    vectors, labels = data.embeddings.astype(np.float64), np.asarray(data.labels)
    n = len(labels)
    base_rate = (np.sum(labels[:, None] == labels[None, :]) - n) / (n * (n - 1))  # every item queries the rest
    probabilities, same = [], []
    for query in range(n):  # brute force: the 10 best other items
        scores = vectors @ vectors[query]
        scores[query] = -np.inf
        for hit in np.argsort(-scores, kind="stable")[:10]:
            probabilities.append(_expected(scores[hit]))
            same.append(labels[hit] == labels[query])
    p, y = np.array(probabilities), np.array(same, float)
    bins = np.minimum((p * 15).astype(int), 14)
    ece = sum(abs(p[bins == b].mean() - y[bins == b].mean()) * (bins == b).sum() / len(p) for b in set(bins.tolist()))
    assert document["float"]["ece"] == pytest.approx(ece, abs=1e-6)
    assert document["float"]["hits"] == 10 * n and document["float"]["base_rate"] == pytest.approx(base_rate)
    cut = document["float"]["cutoffs"][1]
    assert cut["cutoff"] == 0.8 and cut["hits_kept"] == int((p >= 0.8).sum())
    assert cut["recall_kept"] == pytest.approx(y[p >= 0.8].sum() / y.sum())
    assert "ece" in document["binary"]


def test_index_info_says_what_the_calibration_rests_on_or_that_there_is_none(
    calibrated_index: Path, tiny_index_template: Path
) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["index", "info", str(calibrated_index)]).output
    assert any(line.split()[:1] == ["calibration"] and "calibrated by hand" in line for line in shown.splitlines())
    missing = runner.invoke(app, ["index", "info", str(tiny_index_template)]).output
    assert "this model has no calibration (its run kept no validation classes to fit one on" in missing


def test_a_final_fit_model_without_calibration_is_not_blamed_on_split_none(query_file: Path, tmp_path: Path) -> None:
    model_dir = export_tiny_model(tmp_path / "export")  # as an older version exported a final fit: no calibration
    verdict = TrainingVerdict(sentence="...; final fit: retrained on all 24 classes for 2 epochs", decision="trained")
    manifest = ModelManifest.load(model_dir).model_copy(update={"verdict": verdict})
    (model_dir / "model.json").write_text(manifest_json(manifest))
    build_index(model_dir, make_gallery(tmp_path / "gallery"), tmp_path / "index", progress=False)
    with pytest.raises(DataError) as refused:
        search(tmp_path / "index", query_file, k=3, min_probability=0.8)
    assert "--split none" not in str(refused.value)  # it was never passed
    assert "`retrieval export RUN` again carries it over" in str(refused.value)


def _best_prefix(probabilities: list[float]) -> int:
    """By brute force: the n that maximises 2 * sum(p[:n]) / (n + sum(p))."""
    return max(range(1, len(probabilities) + 1), key=lambda n: 2 * sum(probabilities[:n]) / (n + sum(probabilities)))


def test_cutoff_auto_keeps_the_prefix_with_the_best_expected_f1_in_every_door(
    calibrated_index: Path, query_file: Path
) -> None:
    (hits,) = search(calibrated_index, query_file, k=10)
    n = _best_prefix([hit.probability for hit in hits])  # type: ignore[misc]
    (kept,) = search(calibrated_index, query_file, k=10, cutoff="auto")
    assert [hit.item.id for hit in kept] == [hit.item.id for hit in hits[:n]] and kept.below_min_probability == 10 - n
    with pytest.raises(DataError, match="unknown cutoff 'sometimes'"):
        search(calibrated_index, query_file, cutoff="sometimes")
    cli = CliRunner().invoke(app, ["search", str(calibrated_index), str(query_file), "--json", "--cutoff", "auto"])
    assert json.loads(cli.stdout)["cutoff"] == "auto"
    with serving_client(calibrated_index) as client:
        files = {"image": ("q.png", query_png(), "image/png")}
        everything = client.post("/search", files=files, data={"k": "10"}).json()["results"]
        cut = client.post("/search", files=files, data={"k": "10", "cutoff": "auto"}).json()
        assert cut["cutoff"] == "auto"
        assert len(cut["results"]) == _best_prefix([hit["probability"] for hit in everything])
        vector = client.post("/embed", files=files).json()["embedding"]
        by_json = client.post("/search", json={"vector": vector, "k": 10, "cutoff": "auto"}).json()
        assert by_json["cutoff"] == "auto" and len(by_json["results"]) == len(cut["results"])
        assert client.post("/search", json={"vector": vector, "cutoff": "sometimes"}).status_code == 422
        both = client.post("/search?cutoff=auto", files=files, data={"cutoff": "auto"})
        assert both.status_code == 422  # one rule: a setting from the query or the body, never both
        assert client.get("/items/1/similar?k=5&cutoff=auto").json()["cutoff"] == "auto"
        assert client.get("/items/1/similar?k=5&cutoff=sometimes").status_code == 422
