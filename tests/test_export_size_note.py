"""``retrieval export`` says why the model's size differs from the configured ``--embedding-dim``."""

from __future__ import annotations

from typing import Any

from index_fixtures import tiny_manifest

from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict
from retrieval.training.export.size_note import size_note


def _manifest(dim: int, verdict: TrainingVerdict | None = None, **fields: Any) -> ModelManifest:
    return tiny_manifest(dim, verdict=verdict, **fields)


KEPT_BACKBONE = TrainingVerdict(sentence="kept", decision="reference", best_epoch=0, candidate_epoch=3)
TRAINED = TrainingVerdict(sentence="trained", decision="trained", best_epoch=3, candidate_epoch=3)


def test_the_same_size_says_nothing() -> None:
    assert size_note(_manifest(64, KEPT_BACKBONE), 64) is None
    assert size_note(_manifest(64), 64) is None


def test_a_kept_backbone_narrower_than_configured_names_the_pca() -> None:
    note = size_note(_manifest(24, KEPT_BACKBONE), 64)
    assert note is not None
    assert note.startswith("the model is 24-d, not the configured --embedding-dim 64: the verdict kept epoch 0")
    assert "at most one dimension per training image" in note


def test_an_epochs_0_run_at_the_default_width_says_so_and_blames_no_pca() -> None:
    untrained = TrainingVerdict(sentence="no epoch", decision="no-training", best_epoch=0)
    note = size_note(_manifest(1280, untrained), 2048)
    assert note is not None
    assert note.startswith("the model is 1280-d, not the configured --embedding-dim 2048 (the default): no epoch was")
    assert "(--epochs 0)" in note and "kept at the backbone's own width" in note
    assert "PCA keeps no more dimensions than the images" not in note  # was: a PCA blamed where none ran


def test_a_trained_model_of_another_width_names_the_whitening() -> None:
    note = size_note(_manifest(32, TRAINED), 64)
    assert note is not None and "whitening" in note and "32-d" in note


def test_an_ensemble_compares_each_member() -> None:
    assert size_note(_manifest(3 * 64, TRAINED, ensemble_members=3), 64) is None
    note = size_note(_manifest(3 * 24, KEPT_BACKBONE, ensemble_members=3), 64)
    assert note is not None and "24-d" in note
