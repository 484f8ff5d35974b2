"""``retrieval study``: folds, search space, statistics, the protocol's test-set discipline, resuming, report."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from scipy import stats

from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.training.study import runner
from retrieval.training.study.backends import study_evaluation as evaluation
from retrieval.training.study.backends.cached_backend import CachedBackend
from retrieval.training.study.study_state import StudySpec, resumable_state

LOSSES = ["normalized_softmax", "triplet"]
FOLDS, TRIALS, SEEDS = 2, 2, 2


def _spec(data: Path, **changes: Any) -> StudySpec:
    values: dict[str, Any] = dict(
        data=str(data),
        losses=LOSSES,
        folds=FOLDS,
        trials=TRIALS,
        seeds=SEEDS,
        cached_features=True,
        epochs=3,
        image_size=32,
        backbone="resnet18",
        embedding_dim=32,
        batch_size=16,
        overrides=["data.num_workers=0"],
    )
    values.update(changes)
    return StudySpec.from_keywords(**values)


@pytest.fixture(scope="module")
def study(synth_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One small cached-features study, run with a spy on every evaluation and on the protocol's phases."""
    out = tmp_path_factory.mktemp("study") / "out"
    events: list[tuple[str, Any]] = []
    real_evaluate, real_search, real_final = evaluation.evaluate_retrieval, runner.run_search, runner.final_runs

    def evaluate(embeddings, labels, *args, **kwargs):
        events.append(("evaluate", frozenset(str(label) for label in labels)))
        return real_evaluate(embeddings, labels, *args, **kwargs)

    def search(study, space, objective, **kwargs):
        events.append(("search", kwargs["label"]))
        return real_search(study, space, objective, **kwargs)

    def final(spec, loss, *args, **kwargs):
        events.append(("final", loss))
        return real_final(spec, loss, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evaluation, "evaluate_retrieval", evaluate)
        patch.setattr(runner, "run_search", search)
        patch.setattr(runner, "final_runs", final)
        outcome = runner.run_study(_spec(synth_data), out, progress=False)
    return {"out": out, "events": events, "outcome": outcome, "data": synth_data}


# ---- folds -------------------------------------------------------------------------------------


def test_folds_are_contiguous_deterministic_and_disjoint_from_the_test_classes(synth_data: Path) -> None:
    from retrieval.indexing.data.sources import load_records
    from retrieval.indexing.data.splits import split_records
    from retrieval.training.study.backends.folds import fold_split, fold_validation_classes

    records = load_records(synth_data)
    pool = split_records(records, val_fraction=0.0)
    folds = fold_validation_classes(pool.train_classes, 3)
    assert folds == fold_validation_classes(list(reversed(pool.train_classes)), 3)  # order of input irrelevant
    assert [c for fold in folds for c in fold] == sorted(pool.train_classes)  # contiguous blocks, in order
    assert [len(fold) for fold in folds] == [4, 4, 4]
    for i, fold in enumerate(folds):
        split = fold_split(records, i, 3)  # what `retrieval train --val-fold i` uses
        assert split.val_classes == fold
        assert split.train_classes == [c for c in sorted(pool.train_classes) if c not in fold]
        assert split.test_classes == pool.test_classes and not set(fold) & set(pool.test_classes)


def test_too_few_training_classes_for_the_folds_is_one_sentence() -> None:
    from retrieval.training.study.backends.folds import check_fold_count

    check_fold_count(8, 4)
    with pytest.raises(DataError, match="--folds 4 needs at least 8 training classes .* has 7"):
        check_fold_count(7, 4)


def test_max_images_per_class_is_a_deterministic_cap_in_every_split(synth_data: Path) -> None:
    from retrieval.indexing.data.sources import load_records
    from retrieval.indexing.data.subsample import cap_images_per_class
    from retrieval.training.config.train_config import DataConfig
    from retrieval.training.data_pipeline.run_data import prepare_run_data

    records = load_records(synth_data)
    capped = cap_images_per_class(records, 5)
    assert capped == cap_images_per_class(list(reversed(records)), 5)[::-1]  # same images whatever the order
    counts = {label: sum(r.label == label for r in capped) for label in {r.label for r in records}}
    assert set(counts.values()) == {5}
    data = prepare_run_data(DataConfig(path=synth_data, max_images_per_class=5, val_fold=0), progress=False)
    for part in (data.splits.train, data.splits.val, data.splits.test):
        assert part and {sum(r.label == label for r in part) for label in {r.label for r in part}} == {5}
        assert set(part) <= set(capped)


# ---- search space and statistics ---------------------------------------------------------------


def test_every_registered_loss_declares_a_valid_space_and_the_learning_rates_are_searched() -> None:
    from retrieval.training.losses import available_losses, get_loss_spec
    from retrieval.training.study.tuning.search_space import check_loss_space, params_layer, study_space

    for spec in available_losses():
        check_loss_space(spec)
    space = study_space(get_loss_spec("proxy_anchor"), fine_tune=True, has_loss_parameters=True)
    assert {"loss.params.margin", "loss.params.alpha", "optimizer.head_lr", "loss.lr", "optimizer.lr"} == set(space)
    fixed = study_space(
        get_loss_spec("triplet"), fine_tune=False, has_loss_parameters=False, fixed={"loss.params.margin"}
    )
    assert set(fixed) == {"optimizer.head_lr"}
    assert params_layer({"loss.params.margin": 0.1, "optimizer.head_lr": 0.01}) == {
        "loss": {"params": {"margin": 0.1}},
        "optimizer": {"head_lr": 0.01},
    }


def test_the_learning_rate_of_loss_parameters_is_searched_only_where_there_are_some(synth_data: Path) -> None:
    from retrieval.training.study.tuning.study_config import loss_search_space

    spec = _spec(
        synth_data,
        losses=["triplet", "normalized_softmax"],
        overrides=["normalized_softmax:loss.params.temperature=0.1"],
    )
    assert set(loss_search_space(spec, "triplet")) == {"loss.params.margin", "optimizer.head_lr"}
    assert set(loss_search_space(spec, "normalized_softmax")) == {"optimizer.head_lr", "loss.lr"}  # --set fixes it


def test_confidence_interval_matches_scipy_and_a_hand_computation() -> None:
    from retrieval.training.study.reporting.stats import mean_ci

    mean, half = mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302652729911275 / math.sqrt(3))  # t(0.975, 2) * s / sqrt(n)
    values = [0.21, 0.25, 0.22, 0.27, 0.24]
    low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    mean, half = mean_ci(values)
    assert mean == pytest.approx(np.mean(values)) and half == pytest.approx((high - low) / 2)
    assert mean_ci([0.3]) == (0.3, None)


def test_concatenated_is_the_normalised_concatenation_and_separated_the_fold_average() -> None:
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(6), 5).astype(str)
    eval_set = evaluation.EvalSet(labels, np.ones(30, bool), np.ones(30, bool))
    folds = [rng.normal(size=(30, 4)) + np.repeat(rng.normal(size=(6, 4)), 5, axis=0) * (i + 1) for i in range(3)]
    result = evaluation.run_metrics(folds, eval_set)
    unit = [f / np.linalg.norm(f, axis=1, keepdims=True) for f in folds]
    joined = np.hstack(unit) / math.sqrt(3)  # each unit block contributes norm 1: the normalised concatenation
    assert np.allclose(np.linalg.norm(joined, axis=1), 1.0)
    for kind in evaluation.KINDS:
        assert result["concatenated"][kind] == evaluation.metrics(joined.astype(np.float32), eval_set, kind).to_dict()
        for metric in evaluation.REPORTED:
            single = [getattr(evaluation.metrics(f, eval_set, kind), metric) for f in folds]
            assert result["separated"][kind][metric] == pytest.approx(np.mean(single))


# ---- the study end to end (cached features) -----------------------------------------------------


def test_the_test_classes_are_evaluated_only_after_the_search_once_per_model(study: dict[str, Any]) -> None:
    from retrieval.indexing.data.sources import load_records
    from retrieval.indexing.data.splits import split_records
    from retrieval.training.study.backends.folds import fold_validation_classes

    pool = split_records(load_records(study["data"]), val_fraction=0.0)
    test_classes = frozenset(pool.test_classes)
    val_folds = [frozenset(fold) for fold in fold_validation_classes(pool.train_classes, FOLDS)]
    phase, test_evaluations = "reference", 0
    for kind, value in study["events"]:
        if kind in ("search", "final"):
            phase = kind
            continue
        if value == test_classes:
            assert phase != "search", "the test classes were evaluated during a search"
            test_evaluations += 1
        else:
            assert value in val_folds, f"evaluated classes that are no validation fold: {sorted(value)}"
    per_run = FOLDS * 2 + 2  # each fold model float + binary, then the concatenation float + binary
    assert test_evaluations == 4 + len(LOSSES) * SEEDS * per_run  # + the reference: 2 modes x float/binary
    markers = [(kind, value) for kind, value in study["events"] if kind != "evaluate"]
    assert markers == [(phase, loss) for loss in LOSSES for phase in ("search", "final")]


def test_outputs_exist_and_the_tables_have_a_row_per_loss_and_the_reference(study: dict[str, Any]) -> None:
    out = study["out"]
    for name in ("study.md", "study.csv", "study.png", "study.json", "optuna.db"):
        assert (out / name).is_file(), name
    rows = list(csv.DictReader((out / "study.csv").open()))
    names = ["untrained", *LOSSES]
    assert sorted({row["loss"] for row in rows}) == sorted(names)
    assert len(rows) == len(names) * 2 * 2 * 3  # modes x kinds x (P@1, RP, MAP@R)
    for row in rows:
        assert 0.0 <= float(row["mean"]) <= 1.0
        assert (row["ci95"] == "") == (row["loss"] == "untrained")  # 2 seeds give an interval
        assert row["runs"] == ("" if row["loss"] == "untrained" else str(SEEDS))
    markdown = (out / "study.md").read_text()
    assert "not full fine-tuning" in markdown and "Concatenated (64-dim)" in markdown
    for name in names:
        assert markdown.count(f"| {name} |") == 2 + (name in LOSSES)  # float, binary, search tables
    state = json.loads((out / "study.json").read_text())
    assert state["protocol"] == "cached-features" and set(state["losses"]) == set(LOSSES)
    for loss in LOSSES:
        assert state["losses"][loss]["trials_finished"] == TRIALS
        assert len(list((out / "final" / loss).glob("seed_*.json"))) == SEEDS
    csv_map = {(r["loss"], r["mode"], r["kind"], r["metric"]): float(r["mean"]) for r in rows}
    runs = [json.loads((out / "final" / "triplet" / f"seed_{s}.json").read_text()) for s in range(SEEDS)]
    expected = np.mean([run["concatenated"]["float"]["map_at_r"] for run in runs])
    assert csv_map[("triplet", "concatenated", "float", "map_at_r")] == pytest.approx(expected, abs=1e-6)


def test_training_the_head_beats_the_untrained_head_on_validation(study: dict[str, Any]) -> None:
    from retrieval.training.study.tuning.study_config import loss_config

    spec = _spec(study["data"], epochs=8)
    cfg = loss_config(spec, "triplet", {"optimizer.head_lr": 0.003}, seed=0)
    splits = runner._prepare_splits(cfg, FOLDS, progress=False)
    backend = CachedBackend(splits.train + splits.test, splits.test, FOLDS, study["out"] / "features")
    for fold in range(FOLDS):
        result = backend.fit(cfg, fold, study["out"])
        assert result.val_map_at_r > result.untrained_val_map_at_r + 0.03, result
    for loss in LOSSES:  # and the search's best settings did better than the untrained head on average
        folds = json.loads((study["out"] / "study.json").read_text())["losses"][loss]["best_folds"]
        assert np.mean([f["val"]["map_at_r"] for f in folds]) > np.mean([f["untrained_val_map_at_r"] for f in folds])


def test_rerunning_a_finished_study_trains_nothing(study: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(CachedBackend, "fit", lambda *a, **k: calls.append("fit"))
    monkeypatch.setattr(CachedBackend, "fit_and_embed_test", lambda *a, **k: calls.append("final"))
    again = runner.run_study(_spec(study["data"]), study["out"], progress=False)
    assert calls == []
    assert again.rows == study["outcome"].rows


def test_a_different_command_against_the_same_out_is_refused(study: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"--trials 3 \(saved: 2\)"):
        resumable_state(study["out"], _spec(study["data"], trials=3), overwrite=False)


def test_an_interrupted_study_resumes_without_redoing_finished_trials(
    study: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    shutil.copytree(study["out"] / "features", out / "features")  # reuse the embedded features
    spec = _spec(study["data"], losses=["normalized_softmax"], trials=3, seeds=1)
    real_fit = CachedBackend.fit
    calls: list[int] = []
    interrupt_at = [3]  # the second trial's first fold, in the first run only

    def interrupted_fit(self, cfg, fold, workdir):
        calls.append(fold)
        if len(calls) == interrupt_at[0]:
            raise KeyboardInterrupt
        return real_fit(self, cfg, fold, workdir)

    monkeypatch.setattr(CachedBackend, "fit", interrupted_fit)
    with pytest.raises(KeyboardInterrupt):
        runner.run_study(spec, out, progress=False)
    storage = f"sqlite:///{out / 'optuna.db'}"
    cut = optuna.load_study(study_name="normalized_softmax", storage=storage).trials
    assert [t.state.name for t in cut] == ["COMPLETE", "RUNNING"]
    calls.clear()
    interrupt_at[0] = 0
    runner.run_study(spec, out, progress=False)
    assert calls == [0, 1, 0, 1]  # the interrupted trial and the third one; the first is not redone
    trials = optuna.load_study(study_name="normalized_softmax", storage=storage).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    assert trials[0].value == cut[0].value and trials[2].params == cut[1].params  # re-run with its settings


def test_bad_options_fail_before_any_image_is_read(synth_data: Path, tmp_path: Path, monkeypatch) -> None:
    from retrieval.training.data_pipeline import run_data

    monkeypatch.setattr(run_data, "scan_images", lambda *a, **k: pytest.fail("images were scanned"))
    with pytest.raises(ConfigError, match="trainer.epoch"):
        runner.run_study(_spec(synth_data, overrides=["trainer.epoch=3"]), tmp_path / "out", progress=False)
    with pytest.raises(ConfigError, match="set --embedding-dim"):
        runner.run_study(_spec(synth_data, embedding_dim=None, overrides=["model.embedding_dim=null"]), tmp_path)
    assert not (tmp_path / "out").exists()


def test_too_few_classes_for_the_folds_stops_before_anything_is_written(synth_data: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="--folds 7 needs at least 14 training classes"):
        runner.run_study(_spec(synth_data, folds=7), tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()  # so the corrected command is not refused as "other options"


def test_unknown_loss_is_named_with_the_known_ones() -> None:
    from retrieval.cli.commands.study_commands import parse_losses

    assert parse_losses("normsoftmax, triplet") == ["normsoftmax", "triplet"]
    with pytest.raises(
        ConfigError, match="unknown recipe 'tripletloss'; did you mean triplet.*? known recipes: .*triplet"
    ):
        parse_losses("normsoftmax,tripletloss")
    with pytest.raises(ConfigError, match="more than once"):
        parse_losses("triplet,triplet")


@pytest.mark.slow
def test_fine_tuning_runs_the_trainer_per_fold_and_embeds_the_test_classes_only_at_the_end(
    synth_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval.training.run.measures import split_metrics

    evaluated: list[tuple[str, frozenset[str]]] = []
    phase = ["reference"]
    for module in (evaluation, split_metrics):
        real = module.evaluate_retrieval

        def spy(embeddings, labels, *args, _real=real, **kwargs):
            evaluated.append((phase[0], frozenset(str(label) for label in labels)))
            return _real(embeddings, labels, *args, **kwargs)

        monkeypatch.setattr(module, "evaluate_retrieval", spy)
    real_search, real_final = runner.run_search, runner.final_runs
    monkeypatch.setattr(runner, "run_search", lambda *a, **k: (phase.__setitem__(0, "search"), real_search(*a, **k))[1])
    monkeypatch.setattr(runner, "final_runs", lambda *a, **k: (phase.__setitem__(0, "final"), real_final(*a, **k))[1])
    spec = _spec(
        synth_data,
        losses=["normalized_softmax"],
        trials=1,
        seeds=1,
        cached_features=False,
        epochs=1,
        max_images_per_class=4,
        backbone="mobilenet_v3_small",  # small checkpoints: four fold runs write them
    )
    runner.run_study(spec, tmp_path, progress=False)
    test_classes = {label for phase_, labels in evaluated if phase_ == "reference" for label in labels}
    assert all(not labels & test_classes for phase_, labels in evaluated if phase_ == "search")
    assert sum(labels == test_classes for phase_, labels in evaluated if phase_ == "final") == FOLDS * 2 + 2
    search_folds = sorted((tmp_path / "search" / "normalized_softmax").glob("*/fold_*"))
    assert len(search_folds) == FOLDS
    for fold_dir in search_folds:  # validation numbers kept, weights dropped, the test split never embedded
        assert (fold_dir / "fold_result.json").is_file() and not (fold_dir / "checkpoints").exists()
        assert not (fold_dir / "test_metrics.json").exists()
    for fold in range(FOLDS):
        assert (
            tmp_path / "final" / "normalized_softmax" / "seed_0" / f"fold_{fold}" / "checkpoints" / "best.pt"
        ).is_file()
    record = json.loads((tmp_path / "final" / "normalized_softmax" / "seed_0.json").read_text())
    assert record["embedding_dims"] == [32] * FOLDS and set(record["concatenated"]) == {"float", "binary"}
    assert "full fine-tuning" in (tmp_path / "study.md").read_text()
