"""The data audit: scores against a hand computation, out of fold (copies never vouch for each other), and each
door (``retrieval data audit`` on images and on vectors, ``retrieval data apply-relabel``, the Python API,
``retrieval index audit``, ``GET /audit``) giving the same rows."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import sqrtm
from serving_fixtures import GALLERY_SIZE, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.audit.audit_records import audit_note
from retrieval.indexing.audit.audit_scores import audit_scores
from retrieval.indexing.audit.auditing import audit_dataset, audit_index, audit_vectors
from retrieval.indexing.audit.class_votes import KNN_WEIGHT, TEMPERATURE, class_votes
from retrieval.indexing.audit.neighbours import copy_group_ids, out_of_fold_neighbours
from retrieval.indexing.audit.whitening import SHRINK, whitened
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.store.files.index_store import IndexStore

# three classes of 2-D points; item 4 sits among class 0 but is labelled 1 (a planted flip)
POINTS = np.array([[1.0, 0.1], [1.0, -0.1], [0.9, 0.2], [1.0, 0.0], [0.95, 0.05], [0.1, 1.0], [-0.1, 1.0], [0.0, 1.0],
                   [-1.0, 0.1], [-1.0, -0.1], [-0.9, 0.2]])  # fmt: skip
LABELS = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2])


@pytest.fixture(autouse=True)
def audits_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit records ``retrieval train`` reads go to the test's folder, not the user's cache."""
    monkeypatch.setenv("RETRIEVAL_AUDITS", str(tmp_path / "audits"))


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def hand_share(vectors: np.ndarray, labels: np.ndarray, item: int, k: int) -> float:
    """p(given label | item): the k nearest others' weighted votes and the left-out class means, by loops."""
    cosines = vectors @ vectors[item]
    others = sorted((j for j in range(len(vectors)) if j != item), key=lambda j: -cosines[j])[:k]
    weights = {j: np.exp((cosines[j] - 1) / TEMPERATURE) for j in others}
    knn = sum(w for j, w in weights.items() if labels[j] == labels[item]) / sum(weights.values())
    logits = {}
    for c in set(labels.tolist()):
        members = [j for j in range(len(vectors)) if labels[j] == c and j != item]
        mean = vectors[members].sum(axis=0)
        logits[c] = float(vectors[item] @ mean / np.linalg.norm(mean)) / TEMPERATURE
    proto = np.exp(logits[labels[item]]) / sum(np.exp(v) for v in logits.values())
    return KNN_WEIGHT * knn + (1 - KNN_WEIGHT) * proto


def test_label_score_of_a_planted_flip_matches_a_hand_computation() -> None:
    vectors = unit(POINTS)
    votes = class_votes(vectors, LABELS, out_of_fold_neighbours(vectors, 3), copy_group_ids(len(vectors), []))
    for item in range(len(vectors)):
        assert votes.own[item] == pytest.approx(hand_share(vectors, LABELS, item, 3), abs=1e-5)
    assert votes.other[4] == 0  # the flip's suggested class is the one it sits in
    scores = audit_scores(vectors, [str(label) for label in LABELS], k=3)
    space = whitened(vectors, LABELS)
    assert scores.label_scores[4] == pytest.approx(1 - hand_share(space, LABELS, 4, 3), abs=1e-5)
    assert int(np.argmax(scores.label_scores)) == 4 and scores.suggested_name(4) == "0"


def test_whitening_matches_the_matrix_square_root() -> None:
    rng = np.random.default_rng(0)
    vectors, labels = rng.normal(size=(40, 5)), rng.integers(0, 4, 40)
    residuals = vectors - np.stack([vectors[labels == c].mean(axis=0) for c in range(4)])[labels]
    covariance = residuals.T @ residuals / len(vectors)
    covariance += SHRINK * np.trace(covariance) / 5 * np.eye(5)
    expected = unit((vectors - vectors.mean(axis=0)) @ np.real(np.linalg.inv(sqrtm(covariance))))
    got = whitened(vectors, labels)
    np.testing.assert_allclose(got @ got.T, expected @ expected.T, atol=1e-5)  # the same up to a rotation


def test_a_copy_never_vouches_for_itself() -> None:
    """Two copies of a class-0 point, both filed under class 1: each is the other's nearest neighbour."""
    vectors = unit(np.vstack([POINTS, POINTS[4]]))
    labels = [str(label) for label in [*LABELS, 1]]
    alone = audit_scores(vectors, labels, k=1)
    apart = audit_scores(vectors, labels, [[4, 11]], k=1)
    assert alone.neighbours.ids[4, 0] == 11  # without the copy rule the twin answers for it
    assert 11 not in apart.neighbours.ids[4] and 4 not in apart.neighbours.ids[11]
    assert apart.label_scores[4] > 0.9 > alone.label_scores[4]


def read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture()
def vector_files(tmp_path: Path) -> tuple[Path, Path]:
    rows = unit(np.vstack([POINTS, POINTS[4]]))
    np.save(tmp_path / "emb.npy", rows)
    with open(tmp_path / "items.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["key", "label"])
        writer.writerows([f"item{i}", f"c{label}"] for i, label in enumerate([*LABELS, 1]))
    return tmp_path / "emb.npy", tmp_path / "items.csv"


def test_vectors_door_writes_every_item_sorted(vector_files: tuple[Path, Path], tmp_path: Path) -> None:
    vectors, items = vector_files
    out, excluded = tmp_path / "out", tmp_path / "ex.txt"
    args = ["data", "audit", "--vectors", str(vectors), "--items", str(items), "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--exclude-list", str(excluded)])
    assert result.exit_code == 0, result.output
    rows = read(out / "label_issues.csv")
    assert list(rows[0]) == ["key", "label", "suggested_label", "score"] and len(rows) == 12
    assert [float(r["score"]) for r in rows] == sorted((float(r["score"]) for r in rows), reverse=True)
    assert {rows[0]["key"], rows[1]["key"]} == {"item4", "item11"}  # identical vectors: copies, left out
    assert rows[0]["suggested_label"] == "c0"
    expected = audit_vectors(vectors, items)  # the Python API: the same rows
    assert [r["key"] for r in rows] == [r["key"] for r in expected.label_rows()]
    assert list(read(out / "outliers.csv")[0]) == ["key", "label", "score"]
    assert excluded.read_text().splitlines() == expected.suspects()
    assert "item4" in excluded.read_text()


def test_bad_input_is_one_sentence(vector_files: tuple[Path, Path], tmp_path: Path) -> None:
    vectors, _ = vector_files
    result = CliRunner().invoke(app, ["data", "audit", "--vectors", str(vectors), "--out", str(tmp_path / "o"),
                                      "--items", str(tmp_path / "missing.csv")])  # fmt: skip
    assert result.exit_code != 0 and isinstance(result.exception, DataError)
    assert str(result.exception).startswith("there is no items file")


@pytest.fixture()
def mislabelled(gallery_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The test gallery with one class_0 image copied under class_3 (and so also an exact copy)."""
    data = tmp_path / "data"
    shutil.copytree(gallery_dir, data)
    planted = data / "class_3" / "planted.png"
    shutil.copy(data / "class_0" / "img_1.png", planted)
    return data, planted


def test_images_door_and_apply_relabel(mislabelled: tuple[Path, Path], tiny_model_dir: Path, tmp_path: Path) -> None:
    data, planted = mislabelled
    out = tmp_path / "audit"
    args = ["data", "audit", str(data), "--model", str(tiny_model_dir), "--out", str(out), "--quiet"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = read(out / "label_issues.csv")
    assert rows[0]["path"] == str(planted) and rows[0]["suggested_label"] == "class_0"
    assert len(rows) == 31 and (out / "audit.png").stat().st_size > 0
    report = audit_dataset(tiny_model_dir, data, progress=False)  # the Python API: the same rows
    assert [r["path"] for r in report.label_rows()] == [r["path"] for r in rows]
    relabel = read(out / "relabel.csv")
    assert relabel[0] == {"path": str(planted), "label": "class_3", "new_label": "class_0"}
    fixed = tmp_path / "fixed"
    args = ["data", "apply-relabel", str(data), "--relabel", str(out / "relabel.csv"), "--out", str(fixed)]
    result = CliRunner().invoke(app, [*args, "--quiet"])
    assert result.exit_code == 0, result.output
    assert (fixed / "class_0" / "planted.png").exists() and not (fixed / "class_3" / "planted.png").exists()
    assert planted.exists()  # the source is never changed
    assert sum(1 for _ in fixed.glob("*/*.png")) == 31


def test_index_audit_and_get_audit_give_the_same_rows(fresh_index: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["index", "audit", str(fresh_index), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = read(tmp_path / "out" / "label_issues.csv")
    assert list(rows[0]) == ["path", "label", "suggested_label", "score"]  # the columns, no id
    expected = audit_index(fresh_index).label_rows()  # the Python API
    assert [r["path"] for r in rows] == [r["path"] for r in expected] and len(rows) == GALLERY_SIZE
    with IndexStore.open(fresh_index) as store:
        id_of = {str(item.path): item.id for item in store.all_items()}
    assert [r["id"] for r in expected] == [id_of[r["path"]] for r in rows]
    with serving_client(fresh_index, show_paths=True) as client:
        first = client.get("/audit", params={"limit": 4}).json()
        second = client.get("/audit", params={"offset": 4, "limit": 100}).json()
        assert client.get("/audit", params={"limit": 0}).status_code == 422
    assert first["total"] == GALLERY_SIZE and len(first["rows"]) == 4
    shown = [r["path"] for r in first["rows"] + second["rows"]]
    assert shown == [r["path"] for r in rows]
    assert [r["id"] for r in first["rows"] + second["rows"]] == [id_of[r["path"]] for r in rows]
    assert [r["score"] for r in first["rows"]] == pytest.approx([float(r["score"]) for r in rows[:4]], abs=1e-6)


def test_train_note_names_the_last_audit_of_the_same_data(
    mislabelled: tuple[Path, Path], tiny_model_dir: Path, tmp_path: Path
) -> None:
    data, _ = mislabelled
    assert audit_note(data) is None
    report = audit_dataset(tiny_model_dir, data, tmp_path / "out", progress=False)
    note = audit_note(data)
    assert note is not None and f"{len(report.suspects())} of 31 probably mislabelled" in note
    assert audit_note(tmp_path) is None  # another folder: no note


def test_data_check_points_to_the_audit_when_copies_cross_classes(mislabelled: tuple[Path, Path]) -> None:
    data, _ = mislabelled
    result = CliRunner().invoke(app, ["data", "check", str(data), "--quiet"])
    assert result.exit_code == 0, result.output
    assert f"retrieval data audit {data}" in result.output
