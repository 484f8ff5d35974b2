"""``postprocess=qe|kreciprocal`` of ``retrieval search`` and the service: against the methods run by hand
on the stored vectors, a query never expanding with itself, and bad values as 422s."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from serving_fixtures import query_png, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.query.chain import ranked_pages, similar_pages
from retrieval.indexing.query.steps.step import HitPage
from retrieval.indexing.search.postprocess import expand_queries, k_reciprocal_rerank
from retrieval.indexing.search.postprocess_params import IndexPostprocess, KReciprocalParams, QeParams
from retrieval.indexing.search.results import SearchResults
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.shared.index_directory.index_manifest import save_index_manifest
from retrieval.indexing.store.shared.items.item_filter import parse_filter
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.search_settings import SearchSettings


@pytest.fixture(scope="module")
def index_dir(tiny_index_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny index with small post-processing parameters recorded in its manifest."""
    out = tmp_path_factory.mktemp("pp") / "index"
    shutil.copytree(tiny_index_template, out)
    with IndexStore.open(out) as store:
        postprocess = IndexPostprocess(
            qe=QeParams(n=3, alpha=2), kreciprocal=KReciprocalParams(k1=4, k2=2, candidates=12)
        )
        save_index_manifest(out, store.manifest.model_copy(update={"postprocess": postprocess}))
    return out


def _exact(store: IndexStore, query: np.ndarray, k: int, own: int | None = None) -> SearchResults:
    ids = store.ids()
    scores = store.embeddings_of(ids) @ query
    if own is not None:
        scores[ids == own] = -np.inf
    order = np.lexsort((ids, -scores))[:k]
    return SearchResults(ids[order][None], scores[order][None].astype(np.float32))


def test_qe_searches_the_expanded_query(index_dir: Path) -> None:
    with IndexStore.open(index_dir) as store:
        query = store.embedding(7) * 0.9 + store.embedding(20) * 0.1
        query /= np.linalg.norm(query)
        first = _exact(store, query, 3)
        gallery = np.zeros((store.ids().max() + 1, store.dim), np.float32)
        gallery[store.ids()] = store.embeddings_of(store.ids())
        expanded = expand_queries(query[None], gallery, first, QeParams(n=3, alpha=2))[0]
        (hits,) = _hits(ranked_pages(store, query, SearchSettings(k=5, postprocess="qe")))
        expected = _exact(store, expanded, 5)
        assert [item.id for item, _ in hits] == expected.ids[0].tolist()
        np.testing.assert_allclose(
            [score for _, score in hits], expected.scores[0], atol=3e-4
        )  # faiss: float32, stored: float16


def test_similar_with_qe_never_expands_with_the_item_itself(index_dir: Path) -> None:
    with IndexStore.open(index_dir) as store:
        own = store.embedding(7)
        first = _exact(store, own, 3, own=7)
        gallery = np.zeros((store.ids().max() + 1, store.dim), np.float32)
        gallery[store.ids()] = store.embeddings_of(store.ids())
        expanded = expand_queries(own[None], gallery, first, QeParams(n=3, alpha=2))[0]
        (hits,) = _hits(similar_pages(store, [7], SearchSettings(k=4, postprocess="qe")))
        assert [item.id for item, _ in hits] == _exact(store, expanded, 4, own=7).ids[0].tolist()


def test_kreciprocal_reranks_the_top_candidates(index_dir: Path) -> None:
    with IndexStore.open(index_dir) as store:
        query = store.embedding(3)
        first = _exact(store, query, 12, own=3)
        vectors = store.embeddings_of(first.ids[0])
        local = SearchResults(np.arange(12)[None], first.scores)
        reranked = k_reciprocal_rerank(query[None], vectors, local, KReciprocalParams(k1=4, k2=2, candidates=12))
        (hits,) = _hits(similar_pages(store, [3], SearchSettings(k=5, postprocess="kreciprocal")))
        assert [item.id for item, _ in hits] == first.ids[0][reranked.ids[0][:5]].tolist()
        with pytest.raises(DataError, match="unknown postprocess 'dba'"):
            SearchSettings(k=5, postprocess="dba")


@pytest.mark.parametrize("method", ["qe", "kreciprocal"])
def test_a_filter_nothing_passes_gives_no_hits_after_postprocessing(index_dir: Path, method: str) -> None:
    """Found by tests/test_serving_fuzz.py: k-reciprocal re-ranking of no candidates was a 500."""
    nothing = parse_filter({"label": {"$in": ["no such label"]}})
    with IndexStore.open(index_dir) as store:
        assert _hits(
            ranked_pages(store, store.embedding(3), SearchSettings(k=5, postprocess=method, where=nothing))
        ) == [[]]
        assert _hits(similar_pages(store, [3], SearchSettings(k=5, postprocess=method, where=nothing))) == [[]]


def test_the_service_offers_qe_and_kreciprocal(index_dir: Path) -> None:
    with serving_client(index_dir) as client:
        plain = client.post("/search", files={"image": ("q.png", query_png(), "image/png")}, params={"k": 5}).json()
        for method, score_kind in (("qe", "cosine"), ("kreciprocal", "kreciprocal")):
            response = client.post(
                "/search", files={"image": ("q.png", query_png(), "image/png")}, data={"k": "5", "postprocess": method}
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["postprocess"] == method and body["score_kind"] == score_kind
            assert len(body["results"]) == 5
            similar = client.get("/items/7/similar", params={"k": 4, "postprocess": method}).json()
            assert 7 not in [hit["id"] for hit in similar["results"]] and len(similar["results"]) == 4
        assert plain["postprocess"] == "none"
        bad = client.get("/items/7/similar", params={"postprocess": "dba"})
        assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")


def test_search_command_postprocess(index_dir: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["search", str(index_dir), "--id", "7", "-k", "4", "--postprocess", "qe", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    with IndexStore.open(index_dir) as store:
        (hits,) = _hits(similar_pages(store, [7], SearchSettings(k=4, postprocess="qe")))
    assert document["postprocess"] == "qe"
    assert [hit["id"] for hit in document["queries"][0]["results"]] == [item.id for item, _ in hits]
    result = runner.invoke(app, ["search", str(index_dir), "--id", "7", "--postprocess", "dba"])
    assert result.exit_code != 0 and "known: none, qe, kreciprocal" in str(result.exception)


def test_qe_on_a_reranked_binary_search_reranks_one_shortlist(index_dir: Path) -> None:
    """Binary + re-rank: the expanded query re-ranks the first binary shortlist (one Hamming scan)."""
    with IndexStore.open(index_dir) as store:
        query = store.embedding(9)
        shortlist = store.search(query[None], 13, kind="binary")  # rerank 12, plus the item itself
        ids = np.sort(shortlist.ids[0][shortlist.ids[0] != 9])
        vectors = store.embeddings_of(ids)
        scores = vectors @ query
        first = np.lexsort((ids, -scores))[:3]
        local = SearchResults(first[None], scores[first][None].astype(np.float32))
        expanded = expand_queries(query[None], vectors, local, QeParams(n=3, alpha=2))[0]
        final = vectors @ expanded
        expected = ids[np.lexsort((ids, -final))[:4]]
        (hits,) = _hits(similar_pages(store, [9], SearchSettings(k=4, kind="binary", rerank=12, postprocess="qe")))
        assert [item.id for item, _ in hits] == expected.tolist()


def _hits(pages: list[HitPage]) -> list[list[Hit]]:
    return [page.hits for page in pages]
