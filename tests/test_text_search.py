"""Search by words (issue 49): the text tower beside the model embeds a text into the images' space, and every
door (``POST /search`` form and JSON, ``retrieval search --text``, ``search(texts=...)``) answers it through the
same path. ``planted_text_index``'s items ``planted-N`` hold ``PLANTED[N-1]``'s embedding computed in torch
(``text_fixtures``), so a text query must find its planted item first, at score 1."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from serving_fixtures import query_png, serving_client
from text_fixtures import PLANTED, reference_text_embeddings
from typer.testing import CliRunner

import retrieval
from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError, DataError, IndexFormatError
from retrieval.indexing.eval.text_to_image import label_words
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.no_model import NoModelError
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.text_encoder import (
    TEXT_RUN_COMMAND,
    TEXT_RUN_MB,
    NoTextSideError,
    TextEncoder,
    text_encoder_of,
)
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.maintenance.index_verify import verify_index
from retrieval.serving.app import create_app
from retrieval.serving.settings import make_settings

runner = CliRunner()


def _keys(results: list[dict]) -> list[str | None]:
    return [hit.get("key") for hit in results]


def test_encoder_matches_torch_and_is_normalised(tiny_text_model_dir: Path) -> None:
    encoder = text_encoder_of(tiny_text_model_dir, ModelManifest.load(tiny_text_model_dir))
    texts = [*PLANTED, "A PHOTO of a Cat, a dog and a bird and a boat and a car"]  # upper case; truncated
    vectors = encoder.encode(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (len(texts), encoder.dim)
    np.testing.assert_allclose(vectors, reference_text_embeddings(texts), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_encoder_refuses_a_changed_text_file(tiny_text_model_dir: Path, tmp_path: Path) -> None:
    export = Path(shutil.copytree(tiny_text_model_dir, tmp_path / "export"))
    (export / "tokenizer.json").write_text((export / "tokenizer.json").read_text().replace("pickup", "pick-up"))
    manifest = ModelManifest.load(export)
    assert manifest.text is not None
    with pytest.raises(IndexFormatError, match="tokenizer.json has sha256"):
        TextEncoder(export, manifest.text)


def test_python_api_finds_the_planted_item(text_index: Path) -> None:
    found = retrieval.search(text_index, texts=list(PLANTED), k=3)
    assert [hits[0].item.key for hits in found] == ["planted-1", "planted-2", "planted-3"]
    assert all(hits[0].score == pytest.approx(1.0, abs=1e-3) for hits in found)
    berlin = retrieval.search(text_index, texts=["small blue boat"], k=1, filter={"shop": "berlin"})
    assert [hit.item.key for hit in berlin[0]] == ["planted-3"]  # planted-1 and -3 are in berlin
    paris = retrieval.search(text_index, texts=["small blue boat"], k=1, filter={"shop": "paris"})
    assert [hit.item.key for hit in paris[0]] == ["planted-2"]
    second = retrieval.search(text_index, texts=["red pickup truck"], k=1, offset=1)
    first_two = retrieval.search(text_index, texts=["red pickup truck"], k=2)
    assert second[0][0].item.id == first_two[0][1].item.id
    with pytest.raises(DataError, match="empty"):
        retrieval.search(text_index, texts=["  "])
    with pytest.raises(DataError, match="list of texts"):
        retrieval.search(text_index, texts="red pickup truck")  # type: ignore[arg-type]


def test_python_api_scores_are_the_brute_force_cosines(text_index: Path) -> None:
    (hits,) = retrieval.search(text_index, texts=["a photo of a red car"], k=5)
    query = reference_text_embeddings(["a photo of a red car"])[0]
    with open_store(text_index) as store:
        ids = [int(item_id) for item_id in store.ids()]
        cosines = store.embeddings_of(ids) @ query
    by_id = dict(zip(ids, cosines.tolist(), strict=True))
    np.testing.assert_allclose([hit.score for hit in hits], sorted(by_id.values(), reverse=True)[:5], atol=2e-3)
    np.testing.assert_allclose([hit.score for hit in hits], [by_id[hit.item.id] for hit in hits], atol=2e-3)


def test_http_form_and_json(text_index: Path) -> None:
    with serving_client(text_index) as client:
        ready = client.get("/readyz").json()
        assert ready["has_text"] is True
        one = client.post("/search", data={"text": "red pickup truck", "k": "2"})
        assert one.status_code == 200, one.text
        assert _keys(one.json()["results"])[0] == "planted-1" and len(one.json()["results"]) == 2
        batch = client.post("/search", data={"text": list(PLANTED[:2]), "k": "1"})
        assert [entry["image"] for entry in batch.json()["batch"]] == list(PLANTED[:2])
        assert [_keys(entry["results"]) for entry in batch.json()["batch"]] == [["planted-1"], ["planted-2"]]
        by_json = client.post("/search", json={"text": "small blue boat", "k": 1, "filter": {"shop": "paris"}})
        assert _keys(by_json.json()["results"]) == ["planted-2"]
        json_batch = client.post("/search", json={"text": list(PLANTED), "k": 1}).json()
        assert [_keys(entry["results"]) for entry in json_batch["batch"]] == [[f"planted-{n}"] for n in (1, 2, 3)]
        paged = client.post("/search", json={"text": "red pickup truck", "k": 1, "offset": 1}).json()
        two = client.post("/search", json={"text": "red pickup truck", "k": 2}).json()
        assert paged["results"][0]["id"] == two["results"][1]["id"]
        high = client.post("/search", json={"text": "red pickup truck", "k": 5, "min_score": 0.99}).json()
        assert _keys(high["results"]) == ["planted-1"] and high["below_min_score"] == 4


@pytest.mark.parametrize(
    ("request_kwargs", "status", "words"),
    [
        ({"data": {"text": "   "}}, 400, "empty"),
        ({"json": {"text": ""}}, 400, "empty"),
        ({"json": {"text": []}}, 400, "at least one text"),
        ({"json": {"text": "cat", "vector": [0.0] * 64}}, 422, "not both"),
        ({"json": {"text": "cat", "model": "abc"}}, 422, "not both"),
        ({"data": {"text": "cat"}, "files": {"image": ("q.png", query_png(), "image/png")}}, 422, "by images or"),
        ({"data": {"text": ["cat"] * 17}}, 413, "17 texts"),
    ],
)
def test_http_refusals(text_index: Path, request_kwargs: dict, status: int, words: str) -> None:
    with serving_client(text_index) as client:
        response = client.post("/search", **request_kwargs)
    assert response.status_code == status, response.text
    assert words in response.json()["detail"]


def test_http_refuses_a_model_without_text_side(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        assert client.get("/readyz").json()["has_text"] is False
        for response in (client.post("/search", data={"text": "cat"}), client.post("/search", json={"text": "cat"})):
            assert response.status_code == 409, response.text
            detail = response.json()["detail"]
            assert "has no text tower" in detail and "clip_vitb32" in detail and "retrieval export" in detail
            assert (  # the command that makes one, and what it downloads
                "`retrieval train --data DIR --out RUN --epochs 0 --backbone clip_vitb32 --pretrained hub "
                "--allow-download` (about 605 MB of weights, downloaded once)"
            ) in detail
        assert client.post("/search", files={"image": ("q.png", query_png(), "image/png")}).status_code == 200


def test_refusal_says_why_the_text_side_was_dropped(fresh_index: Path) -> None:
    manifest_path = fresh_index / "model" / "model.json"
    dropped = ModelManifest.load(fresh_index / "model").model_copy(
        update={"backbone": "clip_vitb32", "text_dropped": "training changed the image space (3 epochs)"}
    )
    manifest_path.write_text(dropped.model_dump_json())
    with pytest.raises(NoTextSideError, match=r"cannot embed texts: training changed the image space \(3 epochs\)"):
        retrieval.search(fresh_index, texts=["cat"])


def test_vectors_only_index_refuses_texts(tmp_path: Path) -> None:
    vectors = np.eye(4, 8, dtype=np.float32)
    np.save(tmp_path / "v.npy", vectors)
    built = runner.invoke(app, ["index", "build", "--vectors", str(tmp_path / "v.npy"), "--out", str(tmp_path / "i")])
    assert built.exit_code == 0, built.output
    with pytest.raises(NoModelError, match="cannot embed texts"):
        retrieval.search(tmp_path / "i", texts=["cat"])
    with serving_client(tmp_path / "i") as client:
        response = client.post("/search", json={"text": "cat"})
    assert response.status_code == 409 and "cannot embed texts" in response.json()["detail"]


def test_cli_text_search(text_index: Path) -> None:
    table = runner.invoke(app, ["search", str(text_index), "--text", "red pickup truck", "--text", "small blue boat"])
    assert table.exit_code == 0, table.output
    assert "red pickup truck" in table.output and "planted" in table.output
    as_json = runner.invoke(app, ["search", str(text_index), "--text", "small blue boat", "-k", "1", "--json"])
    document = json.loads(as_json.stdout)
    assert document["queries"][0]["query"] == "small blue boat"
    assert document["queries"][0]["results"][0]["key"] == "planted-3"
    blank = runner.invoke(app, ["search", str(text_index), "--text", " "])
    assert isinstance(blank.exception, DataError) and "the text is empty" in str(blank.exception)


def test_index_copy_carries_and_verifies_the_text_side(text_index: Path) -> None:
    assert {"text.onnx", "tokenizer.json"} <= {path.name for path in (text_index / "model").iterdir()}
    verify_index(text_index)
    (text_index / "model" / "text.onnx").write_bytes(b"not a model")
    with pytest.raises(IndexFormatError, match="text side"):
        verify_index(text_index)
    assert "text.onnx has sha256" in _load_failure(text_index)


def _load_failure(index_dir: Path) -> str:
    """The reason a service on ``index_dir`` gives for not being ready."""
    with TestClient(create_app(make_settings(index_dir=index_dir))) as client:
        deadline = time.monotonic() + 30
        while "still loading" in (detail := client.get("/readyz").json()["detail"]) and time.monotonic() < deadline:
            time.sleep(0.05)  # the load runs in the background; its failure replaces "still loading"
        return detail


def _brute_force_text_rows(model_dir: Path, gallery_dir: Path, prompt: str) -> tuple[float, float, dict[int, float]]:
    """MAP@R, P@1 and Recall@K of one prompt per class folder, searched by hand in all the images."""
    paths = sorted(gallery_dir.glob("*/*.png"))
    labels = np.array([path.parent.name for path in paths])
    images = OnnxEmbedder(model_dir).embed_paths(paths, progress=False).embeddings
    classes = sorted(set(labels.tolist()))
    prompts = reference_text_embeddings([prompt.format(label=name.replace("_", " ")) for name in classes])
    aps, firsts, recalls = [], [], {k: [] for k in (1, 2, 4, 8)}
    for name, query in zip(classes, prompts, strict=True):
        relevant = labels[np.argsort(-(images @ query), kind="stable")] == name
        r = int(relevant.sum())
        hits = relevant[:r]
        aps.append(float(np.sum(np.cumsum(hits) / np.arange(1, r + 1) * hits) / r))
        firsts.append(float(relevant[0]))
        for k in recalls:
            recalls[k].append(float(relevant[:k].any()))
    return float(np.mean(aps)), float(np.mean(firsts)), {k: float(np.mean(v)) for k, v in recalls.items()}


def test_eval_text_to_image_row_against_brute_force(tiny_text_model_dir: Path, gallery_dir: Path) -> None:
    prompt = "a small photo of {label}"
    report = retrieval.evaluate(tiny_text_model_dir, gallery_dir, split="all", ks=[1, 2, 4, 8], prompt=prompt)
    assert report.text_to_image is not None and report.text_to_image.num_queries == 6
    map_at_r, p_at_1, recalls = _brute_force_text_rows(tiny_text_model_dir, gallery_dir, prompt)
    assert report.text_to_image.map_at_r == pytest.approx(map_at_r, abs=1e-6)
    assert report.text_to_image.precision_at_1 == pytest.approx(p_at_1, abs=1e-6)
    assert report.text_to_image.recall_at_k == pytest.approx(recalls, abs=1e-6)
    assert report.to_json()["text_to_image"]["map_at_r"] == pytest.approx(map_at_r, abs=1e-6)


def test_eval_cli_prints_and_writes_the_text_row(text_index: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", "--index", str(text_index), "--out", str(tmp_path / "e"), "--grid", "0"])
    assert result.exit_code == 0, result.output
    assert "text->image" in result.output and "'a photo of a {label}'" in result.output
    document = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert {"map_at_r", "precision_at_1", "recall_at_k"} <= set(document["text_to_image"])
    assert document["text_prompt"] == "a photo of a {label}"
    bad = runner.invoke(app, ["eval", "--index", str(text_index), "--prompt", "a photo", "--out", str(tmp_path / "f")])
    assert isinstance(bad.exception, ConfigError) and "{label}" in str(bad.exception)


def test_eval_without_text_tower_has_no_text_row(tiny_model_dir: Path, gallery_dir: Path) -> None:
    report = retrieval.evaluate(tiny_model_dir, gallery_dir, split="all")
    assert report.text_to_image is None and "text_to_image" not in report.to_json()


@pytest.mark.parametrize(
    ("label", "words"),
    [("001.Black_footed_Albatross", "black footed albatross"), ("class_3", "class 3"), ("Red-Car", "red car")],
)
def test_label_words(label: str, words: str) -> None:
    assert label_words(label) == words


def test_index_info_says_whether_words_search(text_index: Path, fresh_index: Path) -> None:
    with_text = runner.invoke(app, ["index", "info", str(text_index)])
    assert with_text.exit_code == 0 and "searchable by words (--text)" in with_text.output
    without = runner.invoke(app, ["index", "info", str(fresh_index)])
    assert "none (the model has no text tower)" in without.output


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("\u200b\u200c\u200d\ufeff", "empty"),
        ("\u0301\u0308", "empty"),
        ("cat\u0000dog", "NUL"),
        ("\u2060 \u200b", "empty"),
    ],
)
def test_text_of_nothing_visible_or_with_nul_is_a_400(text_index: Path, text: str, words: str) -> None:
    """Issue 54: zero-width characters, combining marks alone or a NUL answered 200 with arbitrary hits."""
    with serving_client(text_index) as client:
        for response in (client.post("/search", data={"text": text}), client.post("/search", json={"text": text})):
            assert response.status_code == 400, response.text
            assert words in response.json()["detail"]
        assert client.post("/search", json={"text": "caf\u00e9 \u200bboat"}).status_code == 200


def test_the_refusals_download_size_is_the_hub_weights_own() -> None:
    from retrieval.training.config.hub_access import HUB_WEIGHTS_MB

    assert HUB_WEIGHTS_MB["clip_vitb32"] == TEXT_RUN_MB and "--backbone clip_vitb32" in TEXT_RUN_COMMAND
