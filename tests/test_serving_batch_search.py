"""Batch search: several ``image`` fields in one ``POST /search`` (and several images in ``retrieval.search``)
give the hits of one search per image, in order, from one model call; a bad image fails the whole request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from serving_fixtures import query_png, serving_client
from typer.testing import CliRunner

import retrieval
from retrieval.cli.main import app
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.serving.batcher import MicroBatcher
from retrieval.serving.http.admission import EmbedAdmission
from retrieval.serving.http.service_errors import RetryLaterError


@pytest.fixture()
def model_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The batch size of every call of the real ONNX model."""
    calls: list[int] = []
    real = OnnxEmbedder.embed_arrays

    def counted(self: OnnxEmbedder, batch: np.ndarray) -> np.ndarray:
        calls.append(len(batch))
        return real(self, batch)

    monkeypatch.setattr(OnnxEmbedder, "embed_arrays", counted)
    return calls


def _files(*images: tuple[str, bytes]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("image", (name, data, "image/png")) for name, data in images]


QUERIES = [(f"q{n}.png", query_png(n, 90 + n)) for n in (0, 2, 4)]


def test_a_batch_of_three_is_three_searches_in_one_model_call(tiny_index_template: Path, model_calls) -> None:
    params = {"k": 5, "filter": '{"label": {"$ne": "class_3"}}', "offset": 1}
    with serving_client(tiny_index_template) as client:
        single = [client.post("/search", files=_files(query), params=params).json() for query in QUERIES]
        del model_calls[:]
        response = client.post("/search", files=_files(*QUERIES), params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert model_calls == [3]  # the three images in one call of the model
    assert "results" in single[0] and "batch" not in single[0]  # one image: the one-query shape, as before
    assert "results" not in body and [entry["image"] for entry in body["batch"]] == ["q0.png", "q2.png", "q4.png"]
    assert (body["k"], body["offset"], body["score_kind"]) == (5, 1, "cosine")
    for entry, alone in zip(body["batch"], single, strict=True):
        assert [hit["id"] for hit in entry["results"]] == [hit["id"] for hit in alone["results"]]
        np.testing.assert_allclose(
            [hit["score"] for hit in entry["results"]], [hit["score"] for hit in alone["results"]], atol=1e-5
        )
        assert len(entry["results"]) == 5 and all(hit["label"] != "class_3" for hit in entry["results"])
    assert [entry["results"][0]["label"] for entry in body["batch"]] != [body["batch"][0]["results"][0]["label"]] * 3


def test_min_score_counts_per_image(tiny_index_template: Path) -> None:
    with serving_client(tiny_index_template) as client:
        scores = [
            [hit["score"] for hit in client.post("/search", files=_files(q), params={"k": 6}).json()["results"]]
            for q in QUERIES[:2]
        ]
        threshold = float(np.median(scores[0]))
        body = client.post("/search", files=_files(*QUERIES[:2]), params={"k": 6, "min_score": threshold}).json()
    for entry, own in zip(body["batch"], scores, strict=True):
        kept = [s for s in own if s >= threshold]
        np.testing.assert_allclose([hit["score"] for hit in entry["results"]], kept, atol=1e-6)
        assert entry["below_min_score"] == 6 - len(kept)


@pytest.mark.parametrize(
    ("bad", "status", "words"),
    [
        (("notes.png", b"not an image", "image/png"), 400, "image 2 of 3: "),
        (("notes.txt", b"plain text", "text/plain"), 415, "image 2 of 3: file 'notes.txt' was sent as 'text/plain'"),
        (("empty.png", b"", "image/png"), 400, "image 2 of 3: file 'empty.png' is empty"),
    ],
)
def test_a_bad_image_among_several_fails_the_request_naming_it(
    tiny_index_template: Path, model_calls, bad: tuple[str, bytes, str], status: int, words: str
) -> None:
    files = _files(QUERIES[0]) + [("image", bad)] + _files(QUERIES[1])
    with serving_client(tiny_index_template) as client:
        del model_calls[:]
        response = client.post("/search", files=files)
    assert response.status_code == status, response.text
    assert response.json()["detail"].startswith(words)
    assert model_calls == []  # nothing embedded, nothing answered


def test_more_images_than_the_limit_is_413(tiny_index_template: Path, model_calls) -> None:
    with serving_client(tiny_index_template, max_search_images=2) as client:
        del model_calls[:]
        response = client.post("/search", files=_files(*QUERIES))
        one_less = client.post("/search", files=_files(*QUERIES[:2]))
    assert response.status_code == 413
    detail = response.json()["detail"]
    assert detail == "3 images in one search exceed the limit of 2 (max_search_images); send them in parts."
    assert one_less.status_code == 200 and len(one_less.json()["batch"]) == 2 and model_calls == [2]


def test_the_python_api_searches_a_batch_in_one_model_call(tiny_index_template: Path, tmp_path: Path, model_calls):
    paths = []
    for name, data in QUERIES:
        paths.append(tmp_path / name)
        paths[-1].write_bytes(data)
    single = [retrieval.search(tiny_index_template, path, k=4, offset=2)[0] for path in paths]
    del model_calls[:]
    batch = retrieval.search(tiny_index_template, paths, k=4, offset=2)
    assert model_calls == [3]
    for hits, alone in zip(batch, single, strict=True):
        assert [item.id for item, _ in hits] == [item.id for item, _ in alone]
        np.testing.assert_allclose([s for _, s in hits], [s for _, s in alone], atol=1e-5)


class _SumEmbedder:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed_arrays(self, batch: np.ndarray) -> np.ndarray:
        self.calls.append(len(batch))
        return batch.reshape(len(batch), -1).sum(axis=1, keepdims=True)


def test_the_micro_batcher_keeps_a_batch_search_together() -> None:
    """Sizes 3, 2, 1, 6 with at most 4 per call: 3 alone (3 + 2 > 4), then 2 + 1, then 6 alone (never split)."""

    async def run() -> tuple[list[np.ndarray], list[int]]:
        batcher = MicroBatcher(max_batch_size=4, max_wait_ms=200)
        batcher.start()
        embedder = _SumEmbedder()
        jobs = [
            np.full((n, 1, 1, 1), float(n), dtype=np.float32) * np.arange(1, n + 1)[:, None, None, None]
            for n in (3, 2, 1, 6)
        ]
        results = await asyncio.gather(*(batcher.embed_many(embedder, pixels) for pixels in jobs))
        await batcher.stop()
        return results, embedder.calls

    results, calls = asyncio.run(run())
    assert calls == [3, 3, 6]
    for n, vectors in zip((3, 2, 1, 6), results, strict=True):
        assert vectors[:, 0].tolist() == [float(n * i) for i in range(1, n + 1)]  # each request its own rows


def test_admission_holds_a_place_per_image() -> None:
    admission = EmbedAdmission(limit=4)
    with admission.admit(3):
        assert admission.pending == 3
        with pytest.raises(RetryLaterError):
            with admission.admit(2):
                pass
        with admission.admit(1):
            assert admission.full
    with admission.admit(9):  # larger than the limit: admitted alone, holding every place
        assert admission.pending == 4
    assert admission.pending == 0


def test_the_cli_searches_several_images_in_one_model_call(tiny_index_template: Path, tmp_path: Path, model_calls):
    paths = []
    for name, data in QUERIES:
        paths.append(tmp_path / name)
        paths[-1].write_bytes(data)
    single = [retrieval.search(tiny_index_template, path, k=3)[0] for path in paths]
    del model_calls[:]
    result = CliRunner().invoke(app, ["search", str(tiny_index_template), *map(str, paths), "-k", "3", "--json"])
    assert result.exit_code == 0, result.output
    assert model_calls == [3]
    queries = json.loads(result.stdout)["queries"]
    assert [query["query"] for query in queries] == [str(path) for path in paths]
    for query, alone in zip(queries, single, strict=True):
        assert [hit["id"] for hit in query["results"]] == [item.id for item, _ in alone]
