"""The copy threshold: chosen between the copies' and the distinct pairs' scores, measured at export."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_export import write_run

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.duplicates.copy_threshold_measure import (
    COPIES_END,
    DISTINCT_END,
    choose_threshold,
    measure_copy_threshold,
    synthetic_copies,
)
from retrieval.indexing.duplicates.copy_thresholds import copy_thresholds
from retrieval.indexing.exported_model.copy_threshold import CopyThreshold, ThresholdRates
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.export.run_export import export_run
from retrieval.training.run.outputs.run_dir import write_run_config


def test_threshold_sits_midway_when_copies_and_distinct_pairs_separate() -> None:
    rates = choose_threshold(np.linspace(0.9, 1.0, 100), np.linspace(0.0, 0.5, 100))
    assert rates.threshold == pytest.approx(0.7)
    assert (rates.copy_recall, rates.distinct_rate) == (1.0, 0.0)


def test_the_pixel_checks_threshold_sits_at_the_copies_end_of_the_gap() -> None:
    copies = np.linspace(0.9, 1.0, 101)  # the 1 % quantile (method "lower") is 0.901
    rates = choose_threshold(copies, np.linspace(0.0, 0.5, 100), at=COPIES_END)
    assert rates.threshold == pytest.approx(0.901)
    assert (rates.copy_recall, rates.distinct_rate) == (pytest.approx(100 / 101), 0.0)


def test_the_candidate_threshold_sits_at_the_distinct_pairs_end_of_the_gap() -> None:
    distinct = np.linspace(0.0, 0.5, 101)  # the 99 % quantile (method "higher") is 0.495, just above it admits 1 %
    rates = choose_threshold(np.linspace(0.9, 1.0, 100), distinct, at=DISTINCT_END)
    assert rates.threshold == pytest.approx(0.495) and rates.threshold > 0.495
    assert (rates.copy_recall, rates.distinct_rate) == (1.0, pytest.approx(1 / 101))


def test_threshold_keeps_the_copies_when_the_scores_overlap() -> None:
    copies, distinct = np.linspace(0.5, 1.0, 100), np.linspace(0.0, 0.8, 100)
    rates = choose_threshold(copies, distinct)
    assert rates.threshold == pytest.approx(0.5)
    assert rates.copy_recall == 1.0
    assert rates.distinct_rate == pytest.approx(np.mean(distinct >= 0.5))


def test_the_four_copies_are_slight_changes() -> None:
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8))
    jpeg, small, cropped, recoloured = synthetic_copies(image, random.Random(0))
    assert jpeg.size == image.size and np.asarray(jpeg).tobytes() != image.tobytes()
    assert 0.5 * 80 <= small.width <= 0.8 * 80
    assert 0.92 * 80 <= cropped.width <= 0.98 * 80
    assert recoloured.size == image.size


def test_measured_rates_are_those_of_the_threshold(tiny_model_dir: Path, gallery_records: list[ImageRecord]) -> None:
    measured = measure_copy_threshold(OnnxEmbedder(tiny_model_dir), gallery_records, described_as="gallery")
    assert measured.copies == 4 * measured.images
    labels = [r.label for r in gallery_records]
    assert measured.images == sum(min(6, labels.count(label)) for label in set(labels))
    assert measured.distinct_pairs == sum(
        n * (n - 1) // 2 for n in (min(6, labels.count(label)) for label in set(labels))
    )
    for rates in (measured.float_threshold, measured.binary_threshold):
        assert rates.copy_recall >= 0.99 or rates.distinct_rate > 0.01
    assert measured.pixel_threshold is not None and measured.pixel_threshold.copy_recall >= 0.99
    assert "synthetic copies" in measured.sentence() and "pixel check" in measured.sentence()


def test_export_stores_the_threshold_in_model_json(tmp_path: Path, synth_data: Path) -> None:
    run = write_run(tmp_path / "run")
    config = run.config.model_copy(update={"data": run.config.data.model_copy(update={"path": synth_data})})
    write_run_config(run.run_dir, TrainConfig.model_validate(config.model_dump()))
    result = export_run(run.run_dir)
    stored = json.loads(result.manifest_path.read_text())["duplicates"]
    assert stored == result.manifest.model_dump(mode="json")["duplicates"]
    assert ModelManifest.load(result.manifest_path.parent).duplicates == result.manifest.duplicates
    assert stored["images"] > 0 and stored["measured_on"].endswith(str(synth_data))


def test_with_the_pixel_check_the_embedding_proposes_candidates_at_its_candidate_threshold() -> None:
    def rates(value: float) -> ThresholdRates:
        return ThresholdRates(threshold=value, copy_recall=1.0, distinct_rate=0.0)

    measured = CopyThreshold(
        float_threshold=rates(0.8),
        binary_threshold=rates(0.6),
        pixel_threshold=rates(0.93),
        candidate_threshold=rates(0.7),
        candidate_binary_threshold=rates(0.5),
        images=4,
        copies=16,
        distinct_pairs=6,
    )
    checked = copy_thresholds(measured, None)
    assert (checked.cosine, checked.binary, checked.pixel) == (0.7, 0.5, 0.93)
    alone = copy_thresholds(measured, None, verify=False)
    assert (alone.cosine, alone.binary, alone.pixel) == (0.8, 0.6, None)
    unmeasured = copy_thresholds(measured.model_copy(update={"pixel_threshold": None}), None)
    assert (unmeasured.cosine, unmeasured.pixel) == (0.8, None)
    assert copy_thresholds(measured, 0.9).cosine == 0.9 and copy_thresholds(measured, 0.9).pixel == 0.93
