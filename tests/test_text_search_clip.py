"""Text search end to end with the real export path (issue 49): a tiny random CLIP exported by
``training.export`` (image tower, ``text.onnx``, ``tokenizer.json``), a gallery indexed with it, and texts
searched over HTTP, by the CLI and by the Python API. Every score must be the cosine that open_clip itself
gives between the text (``encode_text``, torch) and the stored image vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import open_clip
import pytest
import torch
from index_fixtures import make_gallery
from serving_fixtures import serving_client
from tiny_clip import tiny_clip_model, tiny_text_export
from typer.testing import CliRunner

import retrieval
from retrieval.cli.main import app
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.build.builder import build_index

TEXTS = ["a red pickup truck", "Two small birds, on a branch!"]


@pytest.fixture(scope="module")
def clip_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clip_text")
    tiny_text_export(root / "export")
    build_index(root / "export", make_gallery(root / "gallery"), root / "index", progress=False)
    return root / "index"


def _open_clip_cosines(index_dir: Path, text: str) -> dict[int, float]:
    with torch.no_grad():
        query = tiny_clip_model().encode_text(open_clip.get_tokenizer("ViT-B-16")([text]))[0].numpy()
    query = query / np.linalg.norm(query)
    with open_store(index_dir) as store:
        ids = [int(item_id) for item_id in store.ids()]
        cosines = store.embeddings_of(ids) @ query
    return dict(zip(ids, cosines.tolist(), strict=True))


def test_http_text_scores_are_open_clips_cosines(clip_index: Path) -> None:
    expected = {text: _open_clip_cosines(clip_index, text) for text in TEXTS}
    with serving_client(clip_index) as client:
        assert client.get("/readyz").json()["has_text"] is True
        answer = client.post("/search", json={"text": TEXTS, "k": 5})
        assert answer.status_code == 200, answer.text
        for text, entry in zip(TEXTS, answer.json()["batch"], strict=True):
            ranked = sorted(expected[text].items(), key=lambda pair: -pair[1])[:5]
            assert [hit["id"] for hit in entry["results"]] == [item_id for item_id, _ in ranked]
            for hit in entry["results"]:
                assert hit["score"] == pytest.approx(expected[text][hit["id"]], abs=1e-4)


def test_cli_and_python_api_agree_with_http(clip_index: Path) -> None:
    (hits,) = retrieval.search(clip_index, texts=[TEXTS[0]], k=3)
    cli = CliRunner().invoke(app, ["search", str(clip_index), "--text", TEXTS[0], "-k", "3", "--json"])
    assert cli.exit_code == 0, cli.output
    cli_ids = [hit["id"] for hit in json.loads(cli.stdout)["queries"][0]["results"]]
    assert cli_ids == [hit.item.id for hit in hits]
    expected = _open_clip_cosines(clip_index, TEXTS[0])
    assert [hit.score for hit in hits] == pytest.approx([expected[hit.item.id] for hit in hits], abs=1e-4)
