"""The OpenAPI document states the service's real contract; OPTIONS lists every allowed method; docs work offline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, ValidationError
from serving_fixtures import API_KEY, query_png, serving_client

from retrieval.indexing.common.errors import DataError, IndexChangedError, ItemNotFoundError
from retrieval.serving.api_models import schemas, vector_schemas
from retrieval.serving.app import create_app
from retrieval.serving.http.problems import PROBLEM_MEDIA_TYPE, status_for
from retrieval.serving.http.service_errors import RetryLaterError
from retrieval.serving.settings import make_settings

K_MAX = 20
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
OPERATIONS = ("get", "post", "delete", "put", "patch")
# What each route can answer besides success, read off the code: the contract the document must state.
EXPECTED_PROBLEMS = {
    ("post", "/search"): {400, 409, 413, 415, 422, 503, 504},  # 409: vectors of another model (JSON)
    ("post", "/embed"): {400, 413, 415, 422, 503, 504},
    ("get", "/items/{item_id}/similar"): {404, 422, 503, 504},
    ("get", "/items/{item_id}"): {404, 422, 503, 504},
    ("get", "/items/{item_id}/thumbnail"): {404, 422, 503, 504},
    ("get", "/items/{item_id}/image"): {404, 422, 503, 504},
    ("post", "/items"): {400, 401, 403, 409, 413, 415, 422, 503, 504},
    ("delete", "/items/{item_id}"): {401, 403, 404, 409, 422, 503, 504},
    ("get", "/items/by-key/{key}"): {404, 422, 503, 504},
    ("put", "/items/by-key/{key}"): {400, 401, 403, 409, 413, 415, 422, 503, 504},
    ("delete", "/items/by-key/{key}"): {401, 403, 404, 409, 422, 503, 504},
    ("get", "/labels"): {422, 503, 504},
    ("get", "/items"): {422, 503, 504},
    ("get", "/duplicates"): {422, 503, 504},
    ("get", "/audit"): {422, 503, 504},
    ("get", "/items/{item_id}/duplicates"): {404, 422, 503, 504},
    ("post", "/admin/reload"): {401, 403, 503, 504},
    ("get", "/readyz"): {503},
    ("get", "/healthz"): set(),
    ("get", "/metrics"): set(),
    ("post", "/items/delete"): {401, 403, 409, 422, 503, 504},
    ("get", "/items/by-key/{key}/similar"): {404, 422, 503, 504},
}


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The document as served; the app is not started (no index needed to describe the API)."""
    app = create_app(make_settings(index_dir=tmp_path_factory.mktemp("unused"), k_max=K_MAX))
    return TestClient(app).get("/openapi.json").json()


def _operations(document: dict) -> dict[tuple[str, str], dict]:
    return {
        (method, path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in OPERATIONS
    }


def _parameter(operation: dict, name: str) -> dict:
    return next(p["schema"] for p in operation["parameters"] if p["name"] == name and p["in"] == "query")


def test_the_binary_index_is_described_without_a_fixed_bit_count(document) -> None:
    """The served model decides the bits (one per embedding dimension): the page must not claim 2048."""
    text = json.dumps(document)
    assert "2048-bit" not in text and "one per embedding dimension" in text


def test_search_parameters_state_the_server_limits(document) -> None:
    k = {"type": "integer", "minimum": 1, "maximum": K_MAX, "default": schemas.DEFAULT_K}
    rerank = {"type": "integer", "minimum": 1, "maximum": 10 * K_MAX}
    search = document["paths"]["/search"]["post"]
    similar = document["paths"]["/items/{item_id}/similar"]["get"]
    form = document["components"]["schemas"]["Body_search_search_post"]["properties"]
    for fields in (lambda name: _parameter(search, name), lambda name: _parameter(similar, name), form.__getitem__):
        assert k.items() <= fields("k").items() and "anyOf" not in fields("k")
        assert rerank.items() <= fields("rerank").items()
        assert fields("kind")["enum"] == ["float", "binary"] and fields("kind")["default"] == "float"
        assert fields("index")["enum"] == ["float", "binary"]  # the older name of kind, still accepted
        assert {"minimum": 0, "maximum": 10 * K_MAX - 1}.items() <= fields("offset").items()
        assert {"type": "number", "minimum": -1.0, "maximum": 1.0}.items() <= fields("min_score").items()
    assert "k <= rerank" in _parameter(search, "rerank")["description"]
    assert [p["name"] for p in search["parameters"] if p.get("deprecated")] == ["index"]
    assert [name for name, field in form.items() if field.get("deprecated")] == ["index"]


def test_writes_name_one_field_per_item_and_mark_the_old_names_deprecated(document) -> None:
    body = document["components"]["schemas"]["Body_add_items_items_post"]["properties"]
    assert {"image", "label", "key", "metadata", "images", "labels"} == set(body)
    assert [name for name, field in body.items() if field.get("deprecated")] == ["images", "labels"]
    assert "one key per image" in body["key"]["description"]
    put = document["components"]["schemas"]["Body_put_by_key_items_by_key__key__put"]
    assert set(put["required"]) == {"image", "label"}


def test_routes_list_only_the_problems_they_can_return(document) -> None:
    assert {status_for(ItemNotFoundError), status_for(DataError), status_for(IndexChangedError)} == {404, 400, 409}
    assert status_for(RetryLaterError) == 503
    operations = _operations(document)
    assert set(operations) == set(EXPECTED_PROBLEMS)
    for key, operation in operations.items():
        problems = {int(status) for status in operation["responses"] if int(status) >= 400}
        assert problems == EXPECTED_PROBLEMS[key], key
    assert "HTTPValidationError" not in document["components"]["schemas"]  # FastAPI's 422 body is not ours


def test_problems_are_documented_as_problem_json_with_examples(document) -> None:
    for key, operation in _operations(document).items():
        for status, response in operation["responses"].items():
            if int(status) < 400:
                continue
            assert set(response["content"]) == {PROBLEM_MEDIA_TYPE}, (key, status)
            content = response["content"][PROBLEM_MEDIA_TYPE]
            assert content["schema"] == PROBLEM_REF
            example = schemas.Problem.model_validate(content["example"])
            assert example.status == int(status) and example.detail


def test_every_operation_has_a_valid_example(document) -> None:
    for key, operation in _operations(document).items():
        success = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
        if key == ("put", "/items/by-key/{key}"):  # 200 replaced, 201 created: the same body
            assert set(success) == {"200", "201"}
            success = {"201": success["201"]}
        assert len(success) == 1, key
        ((status, response),) = success.items()
        if key == ("get", "/items/{item_id}/thumbnail"):
            assert set(response["content"]) == {"image/jpeg"} and "304" in operation["responses"]
            continue
        if key == ("get", "/items/{item_id}/image"):  # the stored file as it is, or PNG
            assert set(response["content"]) == {"image/jpeg", "image/png", "image/webp", "image/gif"}
            assert "304" in operation["responses"]
            continue
        ((media_type, content),) = response["content"].items()
        assert "example" in content, key
        if media_type == "application/json":  # the example is a valid body of (one of) the response model(s)
            refs = [one["$ref"] for one in content["schema"].get("anyOf", [content["schema"]])]
            models = [_model(ref.rsplit("/", 1)[1]) for ref in refs]
            assert any(_valid(model, content["example"]) for model in models), key


def _model(name: str) -> type[BaseModel]:
    return getattr(schemas, name, None) or getattr(vector_schemas, name)


def _valid(model: type[BaseModel], body: object) -> bool:
    try:
        model.model_validate(body)
    except ValidationError:
        return False
    return True


def test_documented_statuses_cover_what_the_service_answers(fresh_index: Path) -> None:
    """Real failures of each kind land on a status the document lists for that operation."""
    key = {"X-API-Key": API_KEY}
    image = ("q.png", query_png(0), "image/png")
    with serving_client(fresh_index, k_max=K_MAX) as client:
        operations = _operations(client.get("/openapi.json").json())
        cases = [
            ("post", "/search", {"files": {"image": ("notes.png", b"not an image", "image/png")}}, 400),
            ("post", "/search", {"files": {"image": ("notes.txt", b"text", "text/plain")}}, 415),
            ("post", "/search", {"files": {"image": image}, "params": {"k": K_MAX + 1}}, 422),
            ("post", "/embed", {"files": {"image": image}, "params": {}}, 200),
            ("get", "/items/{item_id}/similar", {"url": "/items/99999/similar"}, 404),
            ("get", "/items/{item_id}", {"url": "/items/0"}, 422),
            ("get", "/items/{item_id}/thumbnail", {"url": "/items/99999/thumbnail"}, 404),
            ("get", "/items/{item_id}/image", {"url": "/items/99999/image"}, 404),
            ("post", "/items", {"files": [("images", image)], "data": {"labels": "x"}}, 401),
            ("post", "/items", {"files": [("images", image)], "data": {"labels": ""}, "headers": key}, 422),
            ("delete", "/items/{item_id}", {"url": "/items/99999", "headers": key}, 404),
            ("post", "/admin/reload", {"headers": {"X-API-Key": "wrong-key-0000"}}, 403),
        ]
        for method, path, request, expected in cases:
            url = request.pop("url", path)
            response = client.request(method.upper(), url, **request)
            assert response.status_code == expected, (method, url, response.text)
            assert str(expected) in operations[(method, path)]["responses"], (method, path, expected)
        default = client.post("/search", files={"image": image}).json()
        assert default["k"] == len(default["results"]) == schemas.DEFAULT_K  # the documented default


def _pattern(template: str) -> str:
    """The URLs a path template routes: a key is the rest of the path (``{key:path}``), others one segment."""
    return re.sub(r"\{(\w+)\}", lambda name: ".+" if name[1] == "key" else "[^/]+", template)


def test_options_answers_every_allowed_method(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        paths = client.get("/openapi.json").json()["paths"]
        for path in paths:
            url = path.replace("{item_id}", "1")
            answer = client.options(url)  # no API key: OPTIONS reveals methods, never runs a route
            assert answer.status_code == 204 and answer.content == b"", url
            # every path the URL fits (a key may hold '/'), but a literal path is its own route's alone:
            # /items/delete also fits /items/{item_id}, whose GET and DELETE are no methods of it (issue 54)
            fits = [item for template, item in paths.items() if re.fullmatch(_pattern(template), url)]
            fits = [paths[url]] if url in paths and "{" not in url else fits
            allowed = {method.upper() for item in fits for method in item if method in OPERATIONS} | {"OPTIONS"}
            assert set(answer.headers["allow"].split(", ")) == allowed, url
        wrong = client.put("/items/1")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "DELETE, GET, OPTIONS"
        assert client.delete("/items/1").status_code == 401  # the API-key check still guards the write
        assert client.options("/no/such/route").status_code == 404
        assert 'method="OPTIONS",route="/items/{item_id}",status="204"' in client.get("/metrics").text


def test_options_leaves_cors_preflights_to_cors(tiny_index_template: Path) -> None:
    preflight = {"Origin": "http://example.org", "Access-Control-Request-Method": "DELETE"}
    with serving_client(tiny_index_template, cors_origins=["http://example.org"]) as client:
        answer = client.options("/items/1", headers=preflight)
        assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "http://example.org"
        assert "DELETE" in answer.headers["access-control-allow-methods"]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_their_assets_from_this_server(tmp_path: Path, page: str) -> None:
    app = create_app(make_settings(index_dir=tmp_path))
    client = TestClient(app)
    html = client.get(page).text
    assets = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)
    scripts = [url for url in assets if url.endswith(".js")]
    assert scripts and all(url.startswith("/") for url in assets), assets  # nothing from another host
    for url in assets:
        served = client.get(url)
        assert served.status_code == 200 and len(served.content) > 1000, url
    assert "fonts.googleapis" not in html
