"""Search by examples, group_by and diversity through every door (the Python API, ``retrieval search``, the
service's JSON and form ``POST /search``), each against a brute-force reference over the tiny index's own
stored vectors, on the float and the binary index; and the refusals, one sentence each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import retrieval
from retrieval.cli.main import app
from retrieval.indexing.common.errors import DataError, ItemNotFoundError
from retrieval.indexing.examples.strategies import best_score
from retrieval.indexing.store.backends import open_store


def _stored(index: Path) -> tuple[np.ndarray, np.ndarray, list[str], float]:
    with open_store(index) as store:
        ids = np.array(sorted(store.ids()))
        return (
            ids,
            store.embeddings_of(ids).astype(np.float32),
            [store.item(i).label for i in ids],
            store.manifest.binarization_threshold,
        )


def _brute(
    index: Path, positive: list[int], negative: list[int], strategy: str, k: int, kind: str = "float"
) -> list[int]:
    ids, vectors, _, threshold = _stored(index)
    row = {item: n for n, item in enumerate(ids.tolist())}
    good, bad = vectors[[row[i] for i in positive]], vectors[[row[i] for i in negative]]
    if strategy == "best_score":
        scores = best_score(vectors @ good.T, vectors @ bad.T if negative else np.zeros((len(ids), 0)))
    else:
        mean = good.mean(0)
        query = mean + (mean - bad.mean(0)) if negative else mean
        if kind == "binary":
            codes, code = vectors > threshold, query / np.linalg.norm(query) > threshold
            scores = -(codes != code).sum(1).astype(np.float64)
        else:
            scores = vectors @ query
    ranked = [int(ids[i]) for i in np.lexsort((ids, -scores)) if int(ids[i]) not in positive + negative]
    return ranked[:k]


@pytest.mark.parametrize(
    ("strategy", "kind"), [("average_vector", "float"), ("best_score", "float"), ("average_vector", "binary")]
)
def test_the_python_api_by_examples_ranks_like_brute_force(fresh_index: Path, strategy: str, kind: str) -> None:
    ids = _stored(fresh_index)[0].tolist()
    positive, negative = ids[:2], ids[10:11]
    (hits,) = retrieval.search(fresh_index, positive=positive, negative=negative, strategy=strategy, kind=kind, k=6)
    got = [hit.item.id for hit in hits]
    assert not set(got) & set(positive + negative)  # the examples are not returned
    expected = _brute(fresh_index, positive, negative, strategy, 6, kind)
    if kind == "binary":  # Hamming ties: compare the multisets of scores' order by set at this size
        assert len(set(got) & set(expected)) >= 5
    else:
        assert got == expected


def test_examples_by_key_and_by_vector_equal_by_id(fresh_index: Path) -> None:
    ids, vectors, _, _ = _stored(fresh_index)
    by_id = retrieval.search(fresh_index, positive=[int(ids[0])], negative=[int(ids[3])], k=4)[0]
    by_vector = retrieval.search(fresh_index, positive=[vectors[0]], negative=[vectors[3]], k=6)[0]
    assert [h.item.id for h in by_id] == [h.item.id for h in by_vector if h.item.id not in (ids[0], ids[3])][:4]


def test_group_by_label_is_the_brute_force_grouping(fresh_index: Path) -> None:
    ids, vectors, labels, _ = _stored(fresh_index)
    query = vectors[0] + vectors[7]
    query /= np.linalg.norm(query)
    hits = retrieval.search(fresh_index, vectors=[query], k=3, group_by="label", group_size=2)[0]
    scores = vectors @ query
    best: dict[str, list[int]] = {}
    for n in np.lexsort((ids, -scores)):
        best.setdefault(labels[n], []).append(int(ids[n]))
    expected = [
        item
        for label in sorted(best, key=lambda label: -scores[list(ids).index(best[label][0])])[:3]
        for item in best[label][:2]
    ]
    assert [hit.item.id for hit in hits] == expected
    assert len({hit.item.label for hit in hits}) == 3


def test_diversity_is_mmr_by_brute_force(fresh_index: Path) -> None:
    ids, vectors, _, _ = _stored(fresh_index)
    query = vectors[4] + 0.5 * vectors[20]  # no stored item's own vector: no ties
    query /= np.linalg.norm(query)
    hits = retrieval.search(fresh_index, vectors=[query], k=5, diversity=0.5)[0]
    relevance = vectors @ query
    chosen: list[int] = []
    while len(chosen) < 5:
        value = [
            -np.inf
            if n in chosen
            else 0.5 * relevance[n] - 0.5 * max((float(vectors[n] @ vectors[c]) for c in chosen), default=0.0)
            for n in range(len(ids))
        ]
        chosen.append(int(np.argmax(value)))
    assert [hit.item.id for hit in hits] == [int(ids[n]) for n in chosen]
    plain = retrieval.search(fresh_index, vectors=[query], k=5, diversity=0.0)[0]
    assert [h.item.id for h in plain] == [h.item.id for h in retrieval.search(fresh_index, vectors=[query], k=5)[0]]


def test_refusals_in_one_sentence(fresh_index: Path) -> None:
    with pytest.raises(DataError, match="at least one positive example"):
        retrieval.search(fresh_index, negative=[1])
    with pytest.raises(ItemNotFoundError):
        retrieval.search(fresh_index, positive=[10_000])
    with pytest.raises(DataError, match="strategy needs positive examples"):
        retrieval.search(fresh_index, vectors=[np.ones(_stored(fresh_index)[1].shape[1])], strategy="best_score")
    with pytest.raises(DataError, match="unknown strategy 'avg'"):
        retrieval.search(fresh_index, positive=[1], strategy="avg")


def test_the_command_searches_by_examples_like_brute_force(fresh_index: Path) -> None:
    ids = _stored(fresh_index)[0].tolist()
    args = [
        "search",
        str(fresh_index),
        "--positive",
        str(ids[0]),
        "--positive",
        str(ids[1]),
        "--negative",
        str(ids[10]),
    ]
    done = CliRunner().invoke(app, [*args, "--k", "4", "--json"])
    assert done.exit_code == 0, done.output
    (query,) = json.loads(done.stdout)["queries"]
    got = [hit["id"] for hit in query["results"]]
    assert got == _brute(fresh_index, ids[:2], ids[10:11], "average_vector", 4)
    refused = CliRunner().invoke(app, ["search", str(fresh_index), "--negative", str(ids[0])])
    assert isinstance(refused.exception, DataError) and "at least one positive example" in str(refused.exception)


def test_the_service_json_and_form_search_by_examples_like_brute_force(fresh_index: Path) -> None:
    from serving_fixtures import serving_client

    ids = _stored(fresh_index)[0].tolist()
    expected = _brute(fresh_index, ids[:2], ids[10:11], "best_score", 4)
    with serving_client(fresh_index) as client:
        body = {"positive": ids[:2], "negative": [ids[10]], "strategy": "best_score", "k": 4}
        answer = client.post("/search", json=body)
        assert answer.status_code == 200, answer.text
        assert [hit["id"] for hit in answer.json()["results"]] == expected
        assert answer.json()["strategy"] == "best_score"  # echoed like every option
        form = {"positive": [str(ids[0]), str(ids[1])], "negative": [str(ids[10])], "strategy": "best_score", "k": "4"}
        by_form = client.post("/search", data=form)
        assert by_form.status_code == 200, by_form.text
        assert [hit["id"] for hit in by_form.json()["results"]] == expected
        grouped = client.post("/search", json={"positive": ids[:1], "k": 3, "group_by": "label", "group_size": 2})
        assert grouped.status_code == 200 and len({hit["label"] for hit in grouped.json()["results"]}) == 3
        for bad, sentence in (
            ({"negative": [ids[0]]}, "at least one positive example"),
            ({"positive": [10_000]}, "10000"),
            ({"positive": [ids[0]], "strategy": "avg"}, "unknown strategy 'avg'"),
            ({"vector": [0.0] * 4, "strategy": "best_score"}, "strategy needs positive examples"),
            ({"positive": [ids[0]], "diversity": 2}, "diversity must be between 0"),
            ({"positive": [ids[0]], "group_by": "label", "group_size": 10**9}, "group_size must be a whole number"),
            ({"vector": [0.0] * 4, "group_size": 2}, "group_size needs group_by"),
        ):
            refused = client.post("/search", json=bad)
            assert 400 <= refused.status_code < 500 and sentence in refused.text, (bad, refused.text)
