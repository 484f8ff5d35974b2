"""Ensembles (``retrieval train --ensemble L``): DREML grouping, the joined embedding, export, resume, index."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.eval.evaluation import evaluate_model
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.training.config.recipes import recipe
from retrieval.training.config.train_config import build_config
from retrieval.training.data_pipeline.class_grouping import group_classes
from retrieval.training.ensemble.ensemble_training import EnsembleSpec, resolve_ensemble
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.model.ensemble_model import join_embeddings
from retrieval.training.run.fitting.trainer import Trainer
from retrieval.training.run.outputs.run_dir import claim_run_dir, load_checkpoint, load_run_config

DIM, MEMBERS, META = 32, 2, 4
QUICK = [
    "--image-size", "32", "--embedding-dim", str(DIM), "--epochs", "1", "--batch-size", "16",
    "--max-steps-per-epoch", "2", "--workers", "0", "--device", "cpu", "--quiet",
    "--set", "trainer.evaluate_untrained_test=false",
]  # fmt: skip


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=True)


# ---- the DREML grouping and the joined embedding, by hand ----------------------------------------
def test_grouping_is_deterministic_covers_every_class_and_yields_d_meta_classes() -> None:
    classes = [f"class_{i:02d}" for i in range(10)]
    grouping = group_classes(classes, 4, seed=3)
    assert set(grouping) == set(classes)
    assert sorted(np.bincount(list(grouping.values()))) == [2, 2, 3, 3]  # 10 classes dealt into 4 groups
    assert group_classes(reversed(classes), 4, seed=3) == grouping  # the input order does not matter
    others = [group_classes(classes, 4, seed=seed) for seed in range(4, 9)]
    assert any(other != grouping for other in others)  # members (seeds) get different groupings


@pytest.mark.parametrize("meta_classes", [1, 11])
def test_grouping_needs_2_to_c_meta_classes(meta_classes: int) -> None:
    with pytest.raises(ConfigError, match=f"is {meta_classes} but the training split has 10 classes.*from 2 to 10"):
        group_classes([f"c{i}" for i in range(10)], meta_classes, seed=0)


def test_joined_embedding_by_hand() -> None:
    joined = join_embeddings([np.array([[3.0, 4.0]]), np.array([[0.0, 0.0, 2.0]])])
    np.testing.assert_allclose(joined, [[0.6, 0.8, 0.0, 0.0, 1.0]] / np.sqrt(2), atol=1e-7)
    # the joined inner product is the mean of the members' cosine similarities
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 8)), rng.normal(size=(2, 5))
    cosine = [(m[0] @ m[1]) / np.linalg.norm(m[0]) / np.linalg.norm(m[1]) for m in (a, b)]
    pair = join_embeddings([a, b])
    assert pair[0] @ pair[1] == pytest.approx(np.mean(cosine), abs=1e-6)


def test_trainer_with_meta_classes_trains_on_the_groups_and_evaluates_true_classes(
    synth_data: Path, tmp_path: Path
) -> None:
    quick = {
        "data": {"path": str(synth_data), "image_size": 32, "num_workers": 0, "meta_classes": 3},
        "model": {"backbone": "resnet18", "embedding_dim": DIM},
        "trainer": {"batch_size": 16, "device": "cpu", "seed": 5},
    }
    trainer = Trainer(build_config([("recipe", recipe("normsoftmax")), ("test", quick)]), tmp_path / "run")
    grouping = group_classes(trainer.data.splits.train_classes, 3, seed=5)
    train_set = trainer.train_batches.loader.dataset  # type: ignore[attr-defined]  # ImageBatches: images
    assert train_set.labels == [grouping[record.label] for record in train_set.records]
    assert trainer.loss.loss_parameters()[0].shape == (3, DIM)  # softmax over the 3 meta-classes
    assert trainer.val_inputs is not None
    assert len(set(trainer.val_inputs.dataset.labels)) == len(trainer.data.splits.val_classes) >= 2


# ---- one trained ensemble, exported -------------------------------------------------------------
@pytest.fixture(scope="module")
def ensemble_run(synth_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """DREML ensemble of 2 resnet18 members (1 epoch of 2 steps each), trained and exported on the CLI."""
    run = tmp_path_factory.mktemp("ensemble") / "run"
    trained = invoke("train", "--data", synth_data, "--out", run, "--ensemble", MEMBERS, "--meta-classes", META, *QUICK)
    assert trained.exit_code == 0, trained.output
    exported = invoke("export", run)
    assert exported.exit_code == 0, exported.output
    return run, trained.output + exported.output


@pytest.mark.slow
def test_members_are_run_directories_with_their_seeds(ensemble_run: tuple[Path, str]) -> None:
    run, output = ensemble_run
    for index in range(MEMBERS):
        member = load_run_config(run / "members" / str(index))
        assert (member.trainer.seed, member.data.meta_classes) == (index, META)
        assert (run / "members" / str(index) / "test_metrics.json").is_file()
    metrics = json.loads((run / "ensemble_metrics.json").read_text())
    assert (metrics["members"], metrics["embedding_dim"], metrics["meta_classes"]) == (MEMBERS, MEMBERS * DIM, META)
    assert [m["seed"] for m in metrics["member_metrics"]] == [0, 1]
    assert metrics["val"]["num_queries"] > 0 and set(metrics["test"]) >= {"float", "binary"}
    assert f"embedding dim {MEMBERS} x {DIM} = {MEMBERS * DIM} (the binary index has {MEMBERS * DIM} bits)" in output
    assert f"embedding dim {MEMBERS * DIM} = {MEMBERS} members x {DIM}, joined" in output


@pytest.mark.slow
def test_onnx_output_is_the_normalised_concatenation_of_the_members(ensemble_run: tuple[Path, str]) -> None:
    run, _ = ensemble_run
    members = []
    for index in range(MEMBERS):
        member_dir = run / "members" / str(index)
        model = build_embedding_model(load_run_config(member_dir).model)
        model.load_state_dict(load_checkpoint(member_dir / "checkpoints" / "best.pt")["model"])
        members.append(model.eval())
    images = torch.rand(5, 3, 32, 32, generator=torch.Generator().manual_seed(11)) * 4 - 2
    with torch.no_grad():
        expected = F.normalize(torch.cat([F.normalize(m(images), dim=1) for m in members], dim=1), dim=1).numpy()
    manifest = ModelManifest.load(run / "export")
    session = ort.InferenceSession(str(run / "export" / "model.onnx"), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {manifest.input_name: images.numpy()})
    assert actual.shape == (5, MEMBERS * DIM) and np.abs(actual - expected).max() < 1e-5
    assert (manifest.embedding_dim, manifest.ensemble_members) == (MEMBERS * DIM, MEMBERS)
    ensemble_val = json.loads((run / "ensemble_metrics.json").read_text())["val"]
    assert manifest.validation_metrics["map_at_r"] == pytest.approx(ensemble_val["map_at_r"])


@pytest.mark.slow
def test_ensemble_test_metrics_equal_retrieval_eval_of_the_export(
    ensemble_run: tuple[Path, str], synth_data: Path
) -> None:
    run, _ = ensemble_run
    ours = json.loads((run / "ensemble_metrics.json").read_text())["test"]
    report, _ = evaluate_model(run / "export", select_split(load_records(synth_data), "test"), progress=False)
    for kind in ("float", "binary"):
        theirs = report.metrics[kind].to_dict()
        for name in ("map_at_r", "r_precision", "precision_at_1"):
            assert ours[kind][name] == pytest.approx(theirs[name], abs=2e-3), (kind, name)


@pytest.mark.slow
def test_index_built_from_the_ensemble_has_l_times_d_dimensions(
    ensemble_run: tuple[Path, str], synth_data: Path, tmp_path: Path
) -> None:
    run, _ = ensemble_run
    built = invoke("index", "build", "--model", run, "--data", synth_data, "--split", "test", "--out", tmp_path / "ix")
    assert built.exit_code == 0, built.output
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    assert (manifest["dim"], manifest["bits"]) == (MEMBERS * DIM, MEMBERS * DIM)
    query = select_split(load_records(synth_data), "test")[0].path
    found = invoke("search", tmp_path / "ix", query, "-k", 3)
    assert found.exit_code == 0, found.output
    first = found.output.strip().splitlines()[1].split()
    assert first[-1] == str(query) and float(first[2]) == pytest.approx(1.0, abs=2e-3)


@pytest.mark.slow
def test_resume_skips_finished_members(
    ensemble_run: tuple[Path, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = shutil.copytree(ensemble_run[0], tmp_path / "run")  # as if stopped while member 1 trained
    shutil.rmtree(run / "members" / "1")
    (run / "ensemble_metrics.json").unlink()
    finished = run / "members" / "0" / "checkpoints" / "best.pt"
    before = (finished.stat().st_mtime_ns, finished.read_bytes(), (run / "members" / "0" / "metrics.jsonl").read_text())
    caplog.set_level(logging.INFO)
    resumed = invoke("train", "--out", run, "--resume", "--quiet")
    assert resumed.exit_code == 0, resumed.output
    summaries = [record.getMessage() for record in caplog.records if record.name.endswith("run_summary")]
    grouping = f"{MEMBERS} members, seeds 0..{MEMBERS - 1}, each on its own grouping into {META} meta-classes"
    assert summaries[0].startswith(f"ensemble  {grouping}\nrun       {run} (members in {run / 'members'})")
    member_runs = [re.match(r"run\s+(\S+)\n", summary).group(1) for summary in summaries[1:]]
    assert member_runs == [str(run / "members" / "1")]  # member 1's own summary; the finished member 0 has none
    after = (finished.stat().st_mtime_ns, finished.read_bytes(), (run / "members" / "0" / "metrics.jsonl").read_text())
    assert after == before  # member 0 was not touched
    assert load_run_config(run / "members" / "1").trainer.seed == 1
    assert json.loads((run / "ensemble_metrics.json").read_text())["members"] == MEMBERS
    with pytest.raises(ConfigError, match="members/1/checkpoints/best.pt has changed since the export"):
        resolve_export_dir(run)  # the old export no longer holds member 1
    claim_run_dir(run, resume=False, overwrite=True)
    assert not (run / "members").exists() and not (run / "ensemble.json").exists()


# ---- errors -----------------------------------------------------------------------------------------
def test_resume_keeps_the_ensemble_it_started(tmp_path: Path) -> None:
    (tmp_path / "ensemble.json").write_text(EnsembleSpec(members=3).model_dump_json())
    assert resolve_ensemble(tmp_path, None, resume=True) == EnsembleSpec(members=3)
    with pytest.raises(ConfigError, match="ensemble of 3 members; resume it with --ensemble 3"):
        resolve_ensemble(tmp_path, 2, resume=True)
    (tmp_path / "single" / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match="holds a single run"):
        resolve_ensemble(tmp_path / "single", 2, resume=True)
    assert resolve_ensemble(tmp_path / "single", None, resume=True) is None


def test_ensemble_0_is_a_clear_error(synth_data: Path, tmp_path: Path) -> None:
    result = invoke("train", "--data", synth_data, "--out", tmp_path / "run", "--ensemble", 0)
    assert isinstance(result.exception, ConfigError)  # `retrieval` prints it as one line, exit code 2
    assert "--ensemble is the number of models to train and must be at least 1, got 0" in str(result.exception)
    assert not (tmp_path / "run").exists()


def test_too_many_meta_classes_stop_before_anything_is_written(synth_data: Path, tmp_path: Path) -> None:
    result = invoke("train", "--data", synth_data, "--out", tmp_path / "run", "--ensemble", 2, "--meta-classes", 50)
    assert isinstance(result.exception, ConfigError)
    assert "data.meta_classes (--meta-classes) is 50 but the training split has 10 classes" in str(result.exception)
    assert not (tmp_path / "run" / "config.yaml").exists() and not (tmp_path / "run" / "ensemble.json").exists()
