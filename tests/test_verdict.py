"""The verdict measures its own noise: the paired bootstrap interval of a MAP@R gain, the decision it drives
(a trained epoch replaces epoch 0 only when the whole interval is above zero) and the words that say it.

Cases are constructed per-query APs, so each decision is known before the bootstrap runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.cli.commands.index_commands import _verdict_rows
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.eval.gain_interval import paired_gain_interval
from retrieval.indexing.eval.metrics import evaluate_retrieval
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.training_verdict import GainInterval, TrainingVerdict
from retrieval.training.run.measures.verdict import Verdict, beats_reference

RNG = np.random.default_rng(0)
BEFORE = RNG.uniform(0.3, 0.7, 400)  # per-query AP of epoch 0 on 400 validation queries


def _verdict(validation: GainInterval, test: GainInterval | None = None, *, classes: int = 20) -> Verdict:
    """The verdict the trainer reaches for a best epoch 2 with these intervals (the same rule: ``beats_reference``)."""
    return Verdict(
        reference="pretrained",
        epochs=3,
        best_epoch=2 if beats_reference(validation) else 0,
        candidate_epoch=2,
        validation=validation,
        test=test,
        validation_classes=classes,
        validation_queries=validation.queries,
    )


def _noisy_gain(shift: float, spread: float, n: int = 400) -> GainInterval:
    """Epoch 2 moves each query's AP by ``shift`` on average, with per-query noise ``spread``."""
    noise = np.random.default_rng(1).normal(0, spread, n)
    after = BEFORE[:n] + shift + noise - noise.mean()  # the mean gain is exactly ``shift``
    return paired_gain_interval(BEFORE[:n], after)


def test_the_interval_is_the_percentile_interval_of_resampled_mean_gains() -> None:
    before, after = BEFORE[:50], np.clip(BEFORE[:50] + np.linspace(-0.1, 0.2, 50), 0, 1)
    gain = paired_gain_interval(before, after, resamples=300, seed=7)
    rng, diff = np.random.default_rng(7), after - before
    by_hand = [diff[rng.integers(0, 50, 50)].mean() for _ in range(300)]  # one resample at a time
    assert gain.low == pytest.approx(np.percentile(by_hand, 2.5)) and gain.high == pytest.approx(
        np.percentile(by_hand, 97.5)
    )
    assert gain.before == pytest.approx(before.mean()) and gain.after == pytest.approx(after.mean())
    assert (gain.queries, gain.resamples, gain.confidence) == (50, 300, 0.95)
    assert paired_gain_interval(before, after, resamples=300, seed=7) == gain  # a fixed seed: the same interval


def test_the_pairs_must_be_the_same_queries() -> None:
    with pytest.raises(DataError, match="same queries"):
        paired_gain_interval(BEFORE[:10], BEFORE[:9])


def test_per_query_ap_comes_from_the_one_protocol_and_averages_to_map_at_r() -> None:
    # 2 classes of 3; query 0's neighbours by inner product: 1 (same), 3 (other), 2 (same); R = 2, so only the
    # first two ranks count: AP@R = (1/R) (P(1) rel(1) + P(2) rel(2)) = (1 + 0) / 2
    embeddings = np.array([[1, 0], [0.9, 0.1], [0.5, 0.5], [0.8, 0.2], [0, 1], [0.1, 0.9]], np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    metrics = evaluate_retrieval(embeddings, np.array([0, 0, 0, 1, 1, 1]), compute_nmi=False)
    assert metrics.query_ap is not None and len(metrics.query_ap) == metrics.num_queries == 6
    assert metrics.query_ap[0] == pytest.approx(0.5)
    assert metrics.query_ap.mean() == pytest.approx(metrics.map_at_r)
    assert "query_ap" not in metrics.to_dict()


def test_a_gain_inside_noise_keeps_the_pretrained_backbone() -> None:
    gain = _noisy_gain(0.005, 0.15)
    assert gain.low < 0 < gain.high and gain.gain > 0  # the best epoch is ahead, within noise
    verdict = _verdict(gain)
    assert verdict.decision == "reference" and verdict.best_epoch == 0
    sentence = verdict.sentence()
    assert sentence.startswith("no gain beyond validation noise (epoch 2: +")
    assert ", interval -" in sentence and sentence.endswith("): the pretrained backbone is kept")
    assert "improved" not in sentence


def test_a_real_gain_is_kept_and_says_its_interval() -> None:
    gain = _noisy_gain(0.08, 0.05)
    verdict = _verdict(gain)
    assert gain.low > 0 and verdict.decision == "trained" and verdict.best_epoch == 2
    low, high = gain.low / gain.before * 100, gain.high / gain.before * 100
    assert verdict.sentence() == (
        f"training improved validation MAP@R {gain.before:.3f} -> {gain.after:.3f} "
        f"(+{gain.gain / gain.before * 100:.0f} %, interval +{low:.0f} % to +{high:.0f} %) over the pretrained "
        "backbone (epoch 2)"
    )


def test_too_few_validation_classes_make_the_headline_say_unreliable() -> None:
    verdict = _verdict(_noisy_gain(0.08, 0.05), classes=2)
    assert not verdict.reliable and verdict.record().reliable is False
    assert verdict.sentence().startswith(  # the interval that follows may be far above zero: not the threat
        "unreliable choice: it rests on 2 validation classes (400 queries); the interval that follows counts the "
        "noise of those queries, not the luck of which 2 classes happened to be drawn, and other classes might "
        "choose otherwise (add classes, raise --val-fraction, or keep the backbone with --epochs 0); training improved"
    )
    assert "too few to tell a gain from noise" not in verdict.sentence()
    few_queries = _verdict(paired_gain_interval(BEFORE[:60], BEFORE[:60] + 0.05))
    assert few_queries.sentence().startswith(
        "unreliable choice: it rests on 20 validation classes (60 queries), too few queries for the interval that "
        "follows to be trusted (add classes"
    )


def test_test_classes_falling_beyond_their_noise_are_never_called_an_improvement() -> None:
    validation = _noisy_gain(0.08, 0.05)
    test = paired_gain_interval(BEFORE, np.clip(BEFORE - 0.06 + RNG.normal(0, 0.05, 400), 0, 1))
    assert test.below_noise
    verdict = _verdict(validation, test)
    sentence = verdict.sentence()
    assert verdict.decision == "trained" and "improved" not in sentence  # nothing is chosen on test
    assert sentence.startswith(f"validation +{validation.gain / validation.before * 100:.0f} %, interval +")
    assert f", test {test.gain / test.before * 100:.0f} %, interval -" in sentence
    assert sentence.endswith(
        "epoch 2 is kept, as validation chose it, but the test classes disagree beyond their noise"
    )
    within = paired_gain_interval(BEFORE, np.clip(BEFORE - 0.002 + RNG.normal(0, 0.2, 400), 0, 1))
    assert (
        not within.below_noise
        and "; on the test classes, which chose nothing:" in _verdict(validation, within).sentence()
    )


def test_the_record_carries_the_decision_interval_and_counts_typed_into_model_json() -> None:
    record = _verdict(_noisy_gain(0.005, 0.15), classes=12).record()
    assert record.decision == "reference" and record.candidate_epoch == 2 and record.best_epoch == 0
    assert record.validation_classes == 12 and record.validation_queries == 400 and record.reliable
    assert isinstance(record.validation, GainInterval) and str(record) == record.sentence
    assert TrainingVerdict.model_validate_json(record.model_dump_json()) == record
    assert record.figures().startswith("starting backbone kept; validation gain +0.005 (95 % interval -0.0")
    legacy = TrainingVerdict.model_validate("training improved ...")  # an older model.json held the sentence alone
    assert legacy.sentence == "training improved ..." and legacy.decision == "unmeasured"
    assert ModelManifest.model_fields["verdict"].annotation == TrainingVerdict | None


def test_index_info_shows_the_sentence_then_the_decision_and_intervals() -> None:
    record = _verdict(_noisy_gain(0.08, 0.05), classes=3).record()
    (training, sentence), (verdict, figures) = _verdict_rows(record)
    assert (training, verdict) == ("training", "verdict") and sentence == record.sentence
    assert figures.startswith("trained epoch kept; validation gain +0.080 (95 % interval +0.07")
    assert figures.endswith("on 400 queries of 3 classes (unreliable)")
    assert _verdict_rows(None) == []


def test_a_validation_ceiling_says_it_cannot_measure_what_to_ship_and_a_val_fraction_that_would() -> None:
    perfect = np.ones(60)
    ceiling = paired_gain_interval(perfect, perfect)  # 2 validation classes, every query already perfect
    verdict = Verdict(
        reference="pretrained",
        epochs=3,
        best_epoch=0,
        candidate_epoch=0,
        validation=ceiling,
        validation_classes=2,
        validation_queries=60,
        pool_classes=6,  # 12 classes: 6 test, 6 train or validate
    )
    sentence = verdict.sentence()
    assert sentence.startswith("cannot measure: the pretrained backbone already scores validation MAP@R 1.000")
    assert "training did not help" not in sentence and "interval that follows" not in sentence  # none follows
    assert "ship the pretrained backbone (`--epochs 0`)" in sentence
    assert sentence.endswith("measure on 4 validation classes instead of 2: --val-fraction 0.59")
    assert len(split_records(_classes(12), val_fraction=0.59).val_classes) == 4  # the split rule itself
    assert "+0.000 (95 % interval" not in verdict.record().figures()
    assert "1.000 before training, its ceiling: no gain measurable" in verdict.record().figures()
    no_interval = Verdict("pretrained", 3, 0, 0, _noisy_gain(-0.02, 0.05), validation_classes=2, validation_queries=400)
    assert "the interval that follows" not in no_interval.sentence()  # "training did not help" prints none
    itself = paired_gain_interval(BEFORE, BEFORE)  # epoch 0 was the candidate: measured against itself
    unbeaten = Verdict("pretrained", 3, 0, 0, itself, validation_classes=12, validation_queries=400).record()
    assert "interval +0.000 to +0.000" not in unbeaten.figures()
    assert f"validation: no epoch beat epoch 0's MAP@R {BEFORE.mean():.3f} on 400 queries of 12 classes" in (
        unbeaten.figures()
    )


def _classes(count: int) -> list[ImageRecord]:
    return [ImageRecord(path=Path(f"/c{c}/{i}.png"), label=f"c{c:02d}") for c in range(count) for i in range(2)]
