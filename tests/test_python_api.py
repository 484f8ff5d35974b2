"""docs/python.md runs as written: its python blocks execute in order in an empty folder, and what
they leave behind is what the page says (a trained run, an export, an index, hits, metrics)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from retrieval.indexing.common.errors import ConfigError
from retrieval.training import usecases as api

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The namespace the page's blocks leave, run in a fresh folder."""
    folder = tmp_path_factory.mktemp("notebook")
    namespace: dict = {"__name__": "docs_python_md"}
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 6
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        for number, block in enumerate(blocks, start=1):
            exec(compile(block, f"{DOC.name} block {number}", "exec"), namespace)
    namespace["folder"] = folder
    return namespace


@pytest.mark.slow
def test_the_page_trains_exports_indexes_searches_and_evaluates(page: dict) -> None:
    folder, run = page["folder"], page["run"]
    assert run.run_dir == Path("runs/ns") and run.epochs_completed == 4
    written = json.loads((folder / "runs/ns/test_metrics.json").read_text())
    assert run.test.float_metrics.map_at_r == written["float"]["map_at_r"] and run.best_epoch == written["best_epoch"]
    assert run.test.reference.name == "untrained"  # resnet18 from random weights: the page reads .reference
    assert run.test.reference.float_metrics.map_at_r == written["untrained"]["float"]["map_at_r"]
    assert run.verdict is not None and run.verdict.model_dump(mode="json") == written["verdict"]
    assert any((folder / "runs/ns/tensorboard").glob("events.out.tfevents.*"))
    assert page["exported"].max_abs_diff < 1e-3 and (folder / "runs/ns/export/model.onnx").is_file()
    assert page["built"].count == 96 and page["built"].num_labels == 8  # the 8 test classes
    query, hits = page["query"], page["hits"]
    first, score = hits[0][0]
    assert len(hits[0]) == 5 and Path(first.path) == folder / query and score == pytest.approx(1.0, abs=2e-3)
    same_class = page["same_class"][0]
    assert len(same_class) == 3 and {item.label for item, _ in same_class} == {query.parent.name}
    np.testing.assert_allclose(page["vectors"] @ page["vectors"].T, [[1.0]], atol=1e-5)
    index_metrics, model_metrics = page["of_index"].metrics, page["of_model"].metrics
    assert page["of_index"].num_queries == page["of_model"].num_queries == 96
    # the index stores float16 embeddings of the same model: the same numbers up to rounding
    assert index_metrics["float"].map_at_r == pytest.approx(model_metrics["float"].map_at_r, abs=0.01)


def test_config_names_a_bad_key_and_evaluate_needs_a_source() -> None:
    with pytest.raises(ConfigError, match="trainer.epoch: unknown key"):
        api.config("normsoftmax", trainer={"epoch": 3})
    assert api.config(trainer={"epochs": 3}).trainer.epochs == 3
    with pytest.raises(ConfigError, match="needs model and data"):
        api.evaluate(model="runs/x")


@pytest.mark.slow
def test_the_page_embeds_trains_an_ensemble_and_runs_a_study(page: dict) -> None:
    folder, table, stored = page["folder"], page["table"], page["stored"]
    assert len(table.ids) == 96 and table.embeddings.shape == (96, 64)
    np.testing.assert_allclose(np.linalg.norm(table.embeddings, axis=1), 1.0, atol=1e-5)
    # the index holds the same test images embedded by the same model (stored as float16)
    by_path = dict(zip(stored.paths, stored.embeddings, strict=True))
    rows = np.stack([by_path[str(folder / path) if not Path(path).is_absolute() else path] for path in table.paths])
    np.testing.assert_allclose(rows, table.embeddings, atol=2e-3)
    assert np.load(folder / "test_embeddings.npy").shape == (96, 64)
    assert (folder / "test_embeddings.items.csv").is_file()
    ensemble = page["ensemble"]
    assert ensemble.metrics["members"] == 2 and len(ensemble.metrics["member_metrics"]) == 2
    assert page["joined"].manifest.embedding_dim == 128
    outcome = page["outcome"]
    assert {name for name, _ in outcome.rows} >= {"normalized_softmax"}
    assert all((folder / outcome.out / name).is_file() for name in ("study.md", "study.csv", "study.png"))


def test_the_flat_api_is_the_training_api_with_the_same_signatures() -> None:
    """``from retrieval import train`` (lazy: torch loads when it runs) takes exactly what ``retrieval.training.usecases``'s
    does, so the two cannot drift apart; the torch-free names are the very functions of ``retrieval.indexing.usecases``."""
    import inspect

    import retrieval
    import retrieval.indexing.usecases as indexing_api

    for name in ("train", "export", "config", "train_ensemble", "study"):  # one definition, called lazily
        assert getattr(retrieval, name).function is getattr(api, name), name
        assert inspect.signature(getattr(retrieval, name)) == inspect.signature(getattr(api, name)), name
        assert getattr(retrieval, name).__doc__ == getattr(api, name).__doc__, name
    for name in ("build_index", "search", "evaluate", "embed"):
        assert getattr(retrieval, name) is getattr(indexing_api, name), name
    assert set(retrieval.__all__) <= set(dir(retrieval))
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        retrieval.trian  # noqa: B018


def test_train_takes_options_by_config_key_and_refuses_what_cannot_train(tmp_path: Path) -> None:
    from PIL import Image

    from retrieval import train

    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        Image.new("RGB", (40, 40)).save(tmp_path / label / "0.png")
    with pytest.raises(ConfigError, match="did you mean epochs"):
        train(tmp_path, tmp_path / "run", epoch=3)
    with pytest.raises(ConfigError, match="data.image_size 16 is below 32 px"):
        train(tmp_path, tmp_path / "run", image_size=16)
    with pytest.raises(ConfigError, match="a TrainConfig alone"):
        train(api.config(), tmp_path / "run", epochs=2)
