"""``retrieval eval --postprocess``: the protocol of ``evaluate_retrieval``, and a query never expands with itself."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.eval.metrics import evaluate_retrieval
from retrieval.indexing.eval.postprocess_eval import KindSpace, LeaveOneOut, postprocess_metrics, ranking
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.postprocess import augment_database, normalize_rows
from retrieval.indexing.search.postprocess_params import METHODS, DbaParams, PostprocessParams, QeParams


def _clustered(classes: int = 6, per: int = 8, dim: int = 16, noise: float = 1.2, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, dim))
    vectors = normalize_rows(np.repeat(centres, per, axis=0) + noise * rng.normal(size=(classes * per, dim)))
    return vectors, np.repeat(np.arange(classes), per)


FLAGS = {
    "same-set": lambda n: (np.ones(n, bool), np.ones(n, bool)),
    "query-gallery": lambda n: (np.arange(n) % 3 != 0, np.arange(n) % 2 == 0),
}


@pytest.mark.parametrize("protocol", list(FLAGS))
def test_none_is_the_evaluation_of_the_raw_embedding(protocol: str) -> None:
    vectors, labels = _clustered()
    is_query, is_gallery = FLAGS[protocol](len(labels))
    found = postprocess_metrics(vectors, labels, is_query, is_gallery, ["none"], PostprocessParams())["none"]
    float_ = evaluate_retrieval(vectors, labels, is_query, is_gallery, compute_nmi=False)
    binary = evaluate_retrieval(binarize(vectors), labels, is_query, is_gallery, metric="hamming", compute_nmi=False)
    assert found["float"] == float_
    assert found["binary"] == binary


def test_dba_scores_each_query_against_the_gallery_augmented_without_it() -> None:
    vectors, _ = _clustered(classes=4, per=6, dim=8)
    augmented = augment_database(vectors, DbaParams(n=3, alpha=1))
    own = np.arange(len(vectors))
    found = LeaveOneOut(augmented, vectors).search(KindSpace(SearchKind.FLOAT), vectors, 5, own)
    for query in range(len(vectors)):  # brute force: drop the query's term from every sum that holds it
        sums = augmented.sums.copy()
        holders, slots = np.nonzero(augmented.neighbours == query)
        sums[holders] -= augmented.weights[holders, slots][:, None] * vectors[query]
        scores = normalize_rows(sums) @ vectors[query]
        scores[query] = -np.inf
        expected = np.lexsort((np.arange(len(scores)), -scores))[:5]
        np.testing.assert_array_equal(found.ids[query], expected)
        np.testing.assert_allclose(found.scores[query], scores[expected], rtol=1e-5)


def test_a_query_never_expands_with_itself() -> None:
    """With its own copy the only close item, QE must not pull the query towards itself."""
    vectors, labels = _clustered(classes=5, per=6, dim=12, seed=3)
    own = np.arange(len(vectors))
    params = PostprocessParams(qe=QeParams(n=1, alpha=1))
    found = ranking("qe", KindSpace(SearchKind.FLOAT), vectors, vectors, own, 5, params)
    assert not (found.ids == own[:, None]).any()


@pytest.mark.parametrize("protocol", list(FLAGS))
def test_postprocessing_identical_vectors_changes_nothing(protocol: str) -> None:
    """Every item of a class the same vector: each method ranks as the raw embedding does."""
    rng = np.random.default_rng(4)
    labels = np.repeat(np.arange(5), 4)
    vectors = normalize_rows(rng.normal(size=(5, 32)))[labels]
    is_query, is_gallery = FLAGS[protocol](len(labels))
    params = PostprocessParams(qe=QeParams(n=2), dba=DbaParams(n=2))
    found = postprocess_metrics(vectors, labels, is_query, is_gallery, METHODS, params)
    for method in METHODS:
        assert found[method] == found["none"], method


def test_eval_command_reports_each_method_beside_the_raw_row(tiny_model_dir, gallery_dir, tmp_path) -> None:
    out = tmp_path / "eval"
    params = '{"qe": {"n": 2, "alpha": 1}, "dba": {"n": 2}, "kreciprocal": {"k1": 3, "k2": 2, "candidates": 10}}'
    arguments = ["eval", "--model", tiny_model_dir, "--data", gallery_dir, "--split", "all", "--out", out]
    arguments += ["--grid", "0", "--no-reference", "--postprocess", ",".join(METHODS), "--postprocess-params", params]
    result = CliRunner().invoke(app, [str(a) for a in arguments])
    assert result.exit_code == 0, result.output
    assert "MAP@R float" in result.output and "dba+qe" in result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["postprocess"]) == list(METHODS)
    for kind in ("float", "binary"):  # the raw row, measured again the post-processing way
        none = metrics["postprocess"]["none"][kind]
        assert none["map_at_r"] == pytest.approx(metrics[kind]["map_at_r"])
        assert none["recall_at_k"] == pytest.approx(metrics[kind]["recall_at_k"])
    assert metrics["postprocess_params"]["qe"] == {"n": 2, "alpha": 1.0}
    bad = CliRunner().invoke(app, [str(a) for a in arguments[:-4]] + ["--postprocess", "none,aqe"])
    assert bad.exit_code != 0 and "unknown post-processing aqe" in str(bad.exception)
