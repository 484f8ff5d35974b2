"""One name per search option in every door (``kind``, ``filter``; the older ``--binary``, ``index`` and
``where`` kept as aliases), and a rule between options refused with the same sentence by the CLI, the
Python API and the service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from serving_fixtures import query_png, serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing import usecases as api
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.store.shared.items.item_filter import parse_filter
from retrieval.indexing.store.shared.search_settings import RERANK_NEEDS_BINARY, SearchSettings
from retrieval.indexing.usecases import searching
from retrieval.indexing.usecases.searching import SearchOutcome, SearchRequest
from retrieval.serving.http.service_errors import InvalidParameterError
from retrieval.serving.routes.search_fields import SearchOptions, settings_of

WHERE = {"label": "cat"}


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[SearchRequest]:
    """The requests the CLI and the Python API hand to ``search_index`` (which then finds nothing)."""
    seen: list[SearchRequest] = []

    def capture(request: SearchRequest, **_: object) -> SearchOutcome:
        seen.append(request)
        return SearchOutcome([])

    monkeypatch.setattr(api, "search_index", capture)
    monkeypatch.setattr(searching, "search_index", capture)
    return seen


def _cli(tmp_path: Path, *options: str) -> Any:
    return CliRunner().invoke(app, ["search", str(tmp_path), str(tmp_path / "q.png"), *options])


def test_the_cli_says_kind_and_keeps_binary_as_its_alias(requests: list[SearchRequest], tmp_path: Path) -> None:
    for options in (["--kind", "binary"], ["--binary"], ["--kind", "binary", "--binary"]):
        assert _cli(tmp_path, *options).exit_code == 0
    assert [request.settings.kind for request in requests] == ["binary"] * 3
    refused = _cli(tmp_path, "--kind", "float", "--binary")
    assert isinstance(refused.exception, DataError) and "kind and its older name --binary disagree" in str(
        refused.exception
    )
    assert isinstance(_cli(tmp_path, "--kind", "hamming").exception, DataError)


def test_the_python_api_says_filter_and_keeps_where_as_its_alias(requests: list[SearchRequest], tmp_path: Path) -> None:
    api.search(tmp_path, tmp_path / "q.png", filter=WHERE)
    api.search(tmp_path, tmp_path / "q.png", where=WHERE)
    api.search(tmp_path, tmp_path / "q.png", filter=WHERE, where=dict(WHERE))  # the same value twice: fine
    assert [request.settings.where for request in requests] == [parse_filter(WHERE)] * 3
    with pytest.raises(DataError, match="filter and its older name where disagree"):
        api.search(tmp_path, tmp_path / "q.png", filter=WHERE, where={"label": "dog"})


def test_the_route_says_kind_and_keeps_index_as_its_alias() -> None:
    services: Any = SimpleNamespace(settings=SimpleNamespace(k_max=100))
    assert settings_of(services, SearchOptions(5, "binary", rerank=30)) == SearchSettings(5, "binary", 30)


@pytest.fixture(scope="module")
def client(tiny_index_template: Path) -> Iterator[TestClient]:
    with serving_client(tiny_index_template, k_max=20) as client:
        yield client


def _search(client: TestClient, params: dict[str, str] | None = None, data: dict[str, str] | None = None) -> Any:
    return client.post("/search", params=params, data=data, files={"image": ("q.png", query_png(0), "image/png")})


def test_the_service_reads_kind_and_index_alike(client: TestClient) -> None:
    by_kind = _search(client, {"kind": "binary", "k": "3"})
    by_index = _search(client, {"index": "binary", "k": "3"})
    by_form = _search(client, data={"kind": "binary", "k": "3"})
    assert by_kind.status_code == by_index.status_code == by_form.status_code == 200, by_kind.text
    assert by_kind.json()["results"] == by_index.json()["results"] == by_form.json()["results"]
    assert by_kind.json()["score_kind"] == "hamming"
    disagree = _search(client, {"kind": "float", "index": "binary"})
    assert disagree.status_code == 422 and "kind and its older name index disagree" in disagree.json()["detail"]


def test_a_rerank_on_the_float_index_is_refused_with_one_sentence_by_every_door(
    client: TestClient, requests: list[SearchRequest], tmp_path: Path
) -> None:
    with pytest.raises(DataError) as python:
        api.search(tmp_path, tmp_path / "q.png", rerank=30)
    command = _cli(tmp_path, "--rerank", "30")
    service = _search(client, {"rerank": "30", "k": "3"})
    similar = client.get("/items/1/similar", params={"rerank": "30", "kind": "float", "k": "3"})
    assert str(python.value) == str(command.exception) == RERANK_NEEDS_BINARY
    assert service.status_code == similar.status_code == 422
    assert service.json()["detail"] == similar.json()["detail"] == RERANK_NEEDS_BINARY
    assert requests == []  # refused before any search
    assert _search(client, {"rerank": "30", "k": "3", "kind": "binary"}).status_code == 200


def test_the_settings_refuse_a_rerank_without_the_binary_index() -> None:
    with pytest.raises(DataError, match="needs kind binary"):
        SearchSettings(kind="float", rerank=5)
    assert SearchSettings(kind="float", rerank=0).rerank is None  # 0: no re-ranking, as the Python API took it
    with pytest.raises(InvalidParameterError, match="needs kind binary"):
        settings_of(SimpleNamespace(settings=SimpleNamespace(k_max=100)), SearchOptions(5, rerank=30))  # type: ignore[arg-type]
