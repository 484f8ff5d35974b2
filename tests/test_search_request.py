"""``SearchSettings`` / ``SearchRequest``: the three entry points of a search (``retrieval search``, the
Python API's ``search``, the service's ``POST /search``) spell the same settings and build the same value."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import retrieval
from retrieval.cli.main import app
from retrieval.indexing import usecases as api
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.store.shared.items.item_filter import parse_filter
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.usecases import searching
from retrieval.indexing.usecases.searching import SearchOutcome, SearchRequest
from retrieval.serving.http.service_errors import InvalidParameterError
from retrieval.serving.routes.search_fields import SearchOptions, settings_of

FILTER = '{"label": {"$in": ["cat", "dog"]}, "price": {"$lt": 50}}'
CLI_OPTIONS = ["-k", "7", "--binary", "--rerank", "30", "--filter", FILTER, "--postprocess", "qe"]
CLI_OPTIONS += ["--offset", "2", "--min-score", "0.25"]
API_OPTIONS: dict[str, Any] = {"kind": "binary", "rerank": 30, "postprocess": "qe", "offset": 2, "min_score": 0.25}
API_OPTIONS["where"] = {"label": {"$in": ["cat", "dog"]}, "price": {"$lt": 50}}


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[SearchRequest]:
    """The requests handed to ``search_index`` (which then finds nothing) by the CLI and the Python API."""
    seen: list[SearchRequest] = []

    def capture(request: SearchRequest, **_: object) -> SearchOutcome:
        seen.append(request)
        return SearchOutcome([])

    monkeypatch.setattr(api, "search_index", capture)  # what the command calls
    monkeypatch.setattr(searching, "search_index", capture)  # what the Python API's search calls
    return seen


def test_the_cli_and_the_python_api_resolve_the_same_request(requests: list[SearchRequest], tmp_path: Path) -> None:
    images = [tmp_path / "a.jpg", tmp_path / "b.jpg"]
    result = CliRunner().invoke(app, ["search", str(tmp_path), *map(str, images), *CLI_OPTIONS])
    assert result.exit_code == 0, result.output
    retrieval.search(tmp_path, images, 7, **API_OPTIONS)  # the flat import: the same function
    api.search(str(tmp_path), [str(image) for image in images], 7, **API_OPTIONS)  # text paths alike
    cli, *python = requests
    assert python == [cli, cli]
    assert cli == SearchRequest(
        tmp_path,
        SearchSettings(7, "binary", 30, parse_filter(FILTER), "qe", 2, 0.25),
        tuple(images),
    )


def test_the_defaults_are_the_same(requests: list[SearchRequest], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["search", str(tmp_path), str(tmp_path / "q.png")])
    assert result.exit_code == 0, result.output
    api.search(tmp_path, tmp_path / "q.png")
    assert requests[0] == requests[1] == SearchRequest(tmp_path, SearchSettings(), (tmp_path / "q.png",))
    assert requests[0].settings == SearchSettings(10, "float", None, None, "none", 0, None)


def test_the_service_builds_the_same_settings_from_its_parameter_names() -> None:
    services: Any = SimpleNamespace(settings=SimpleNamespace(k_max=100))
    settings = settings_of(services, SearchOptions(7, "binary", None, 30, FILTER, "qe", 2, 0.25))
    assert settings == SearchRequest.of(Path("."), [], k=7, **API_OPTIONS).settings
    assert settings_of(services, SearchOptions()) == SearchSettings()  # absent parameters: the defaults
    with pytest.raises(InvalidParameterError, match="k must be between 1 and 100, got 101"):
        settings_of(services, SearchOptions(101))
    with pytest.raises(InvalidParameterError, match="parameter 'filter'"):
        settings_of(services, SearchOptions(5, filter="[1]"))
    with pytest.raises(InvalidParameterError, match="min_score must be between -1 and 1"):
        settings_of(services, SearchOptions(5, min_score=1.5))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"k": 0}, "k must be at least 1, got 0"),
        ({"k": True}, "k must be at least 1"),
        ({"kind": "cosine"}, "cosine"),
        ({"rerank": -1}, "rerank must be a whole number of at least 1"),
        ({"postprocess": "dba"}, "unknown postprocess 'dba'; use one of none, qe, kreciprocal"),
        ({"offset": -1}, "offset must be a whole number of at least 0"),
        ({"min_score": 1.5}, "min_score must be between -1 and 1"),
        ({"min_score": math.nan}, "min_score must be between -1 and 1"),
    ],
)
def test_a_bad_setting_is_one_sentence(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(DataError, match=message):
        SearchSettings(**bad)


def test_a_bad_setting_fails_before_any_image_is_read(requests: list[SearchRequest], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["search", str(tmp_path), "missing.png", "--filter", "{not json"])
    assert result.exit_code != 0 and "--filter" in str(result.exception)
    with pytest.raises(DataError, match="min_score must be between"):
        api.search(tmp_path, "missing.png", min_score=-2)
    assert requests == []


def test_what_the_settings_derive() -> None:
    assert SearchSettings(k=5, offset=3).depth == 8
    assert SearchSettings(kind=SearchKind.BINARY).kind == "binary"  # the enum given: its name
    assert SearchSettings(kind="binary").score_kind == "hamming"
    assert SearchSettings(kind="binary", rerank=50).score_kind == "cosine"
    assert SearchSettings(kind="binary", rerank=0).rerank is None  # as the Python API's search always took it
    assert SearchSettings(postprocess="kreciprocal").score_kind == "kreciprocal"
    assert SearchSettings.parse(where={"label": "x"}) == SearchSettings(where=parse_filter({"label": "x"}))
    assert SearchSettings.parse(where="  ").where is None
