"""Text no index can hold or match (lone surrogates, NUL), JSON nested past any use, and labels past their limit: the
same rule at every door (service 422, CLI one sentence and exit 2, Python API DataError), and an index
that already holds such text (written before the rule) still serves it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from index_fixtures import make_image
from serving_fixtures import API_KEY, image_bytes, query_png, serving_client

from retrieval.indexing.common.artifact_names import ITEMS_DB_NAME
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import MAX_LABEL_CHARS, ImageRecord
from retrieval.indexing.store.shared.items.item_filter import MAX_JSON_DEPTH, parse_filter, parse_metadata

KEY = {"X-API-Key": API_KEY}
RETRIEVAL = [sys.executable, "-c", "from retrieval.cli.main import main; main()"]
LONE = '{"note": "\\ud800"}'  # JSON text whose string decodes to a lone surrogate
NUL_KEY = '{"a\\u0000b": 1}'  # SQLite's JSON path ends at the NUL: a 500 before the rule
NUL_VALUE = '{"a": "x\\u0000"}'  # compared as "x": the wrong items before the rule
NUL = "NUL character"
DEEP_ARRAYS = "[" * 2000 + "]" * 2000  # 4,000 bytes: under the 4,096-byte cap
DEEP_OBJECTS = '{"":' * 800 + "1" + "}" * 800  # 4,001 bytes


def _problem(response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return response.json()["detail"]


def _add(client, *, labels: str = "new", metadata: str | None = None):
    files = [("images", ("new.png", image_bytes(make_image(1, 80)), "image/png"))]
    data = {"labels": labels, **({"metadata": metadata} if metadata is not None else {})}
    return client.post("/items", files=files, data=data, headers=KEY)


def _search(client, filter_: str):
    return client.post("/search", files={"image": ("q.png", query_png(1), "image/png")}, params={"filter": filter_})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (LONE, "lone surrogate"),
        ('{"\\udc80": 1}', "lone surrogate"),
        (NUL_KEY, NUL),
        (NUL_VALUE, NUL),
        (DEEP_ARRAYS, f"nests 2000 levels deep; at most {MAX_JSON_DEPTH}"),
        (DEEP_OBJECTS, f"nests 800 levels deep; at most {MAX_JSON_DEPTH}"),
    ],
)
def test_the_service_refuses_hostile_metadata_and_filters_with_422(fresh_index: Path, text: str, message: str) -> None:
    with serving_client(fresh_index) as client:
        count = client.get("/readyz").json()["count"]
        assert message in _problem(_add(client, metadata=text), 422)
        assert message in _problem(_search(client, text), 422)
        assert message in _problem(client.get("/items/1/similar", params={"filter": text}), 422)
        assert client.get("/readyz").json()["count"] == count  # nothing was added


def test_the_service_refuses_overlong_labels_with_422(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        detail = _problem(_add(client, labels="x" * (MAX_LABEL_CHARS + 1)), 422)
        assert f"at most {MAX_LABEL_CHARS} characters" in detail
        assert _add(client, labels="x" * MAX_LABEL_CHARS).status_code == 201


def test_the_service_refuses_a_nul_in_a_label_with_422(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        assert NUL in _problem(_add(client, labels="a\0b"), 422)


def _multipart(fields: list[tuple[str, bytes]], image: bytes) -> tuple[bytes, dict[str, str]]:
    """A multipart body with raw field bytes (a client would have to build it by hand, as here)."""
    boundary = b"hostile-text-boundary"
    parts = [b'Content-Disposition: form-data; name="%s"\r\n\r\n%s' % (name.encode(), value) for name, value in fields]
    parts.append(
        b'Content-Disposition: form-data; name="images"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n' + image
    )
    body = b"".join(b"--" + boundary + b"\r\n" + part + b"\r\n" for part in parts) + b"--" + boundary + b"--\r\n"
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary.decode()}", **KEY}


@pytest.mark.parametrize("field", ["labels", "metadata"])
def test_form_text_that_is_not_utf8_is_refused_with_400_not_stored_as_latin1(fresh_index: Path, field: str) -> None:
    """Starlette decodes such a field as Latin-1: b"caf\\xe9" was stored as "caf\u00e9" with a 201."""
    bad = b"caf\xe9" if field == "labels" else b'{"shop": "caf\xe9"}'
    fields = [("labels", b"ok"), ("metadata", b"{}")]
    fields = [(name, bad if name == field else value) for name, value in fields]
    with serving_client(fresh_index) as client:
        count = client.get("/readyz").json()["count"]
        body, headers = _multipart(fields, image_bytes(make_image(1, 81)))
        assert f"form field '{field}' is not valid UTF-8 text" in _problem(
            client.post("/items", content=body, headers=headers), 400
        )
        body, headers = _multipart([("labels", "café".encode())], image_bytes(make_image(1, 82)))
        added = client.post("/items", content=body, headers=headers)
        assert added.status_code == 201, added.text
        assert client.get(f"/items/{added.json()['ids'][0]}").json()["label"] == "café"
        assert client.get("/readyz").json()["count"] == count + 1


def test_the_python_api_applies_the_same_rule() -> None:
    for text in (LONE, NUL_KEY, NUL_VALUE, DEEP_ARRAYS):
        with pytest.raises(DataError):
            parse_metadata(text)
        with pytest.raises(DataError):
            parse_filter(text)
    assert parse_filter('{"note": "\\u00e9\\ud83d\\ude00"}') is not None  # a valid pair is one character


def test_index_add_refuses_labels_the_index_cannot_keep(fresh_index: Path, tmp_path: Path) -> None:
    from retrieval.indexing.store.files.index_store import IndexStore

    long_label = ImageRecord(path=tmp_path / "a.png", label="y" * (MAX_LABEL_CHARS + 1))
    lone_label = ImageRecord(path=tmp_path / "a.png", label="bad\ud800label")
    nul_label = ImageRecord(path=tmp_path / "a.png", label="bad\0label")
    nul_key = ImageRecord(path=tmp_path / "a.png", label="ok", metadata={"a\0b": 1})
    nul_value = ImageRecord(path=tmp_path / "a.png", label="ok", metadata={"filename": "x\0.png"})
    refused = [
        (long_label, "characters long"),
        (lone_label, "not valid UTF-8"),
        (nul_label, NUL),
        (nul_key, NUL),
        (nul_value, NUL),
    ]
    with IndexStore.open(fresh_index) as store:
        dim = store.manifest.dim
        for record, message in refused:
            with pytest.raises(DataError, match=message):
                store.add([record], [[1.0] + [0.0] * (dim - 1)])


def _store_raw_metadata(index_dir: Path, item_id: int, metadata_json: str, label: str | None = None) -> None:
    """What an index written before the rule may hold (json.dumps escapes the surrogate as \\ud800)."""
    with sqlite3.connect(index_dir / ITEMS_DB_NAME) as db:
        db.execute("UPDATE items SET metadata = ? WHERE id = ?", (metadata_json, item_id))


def test_an_index_that_already_holds_a_lone_surrogate_still_serves_it(fresh_index: Path) -> None:
    _store_raw_metadata(fresh_index, 1, json.dumps({"note": "a\ud800b"}))
    with serving_client(fresh_index) as client:
        item = client.get("/items/1")
        assert item.status_code == 200 and item.json()["metadata"] == {"note": "a\ufffdb"}
        similar = client.get("/items/2/similar", params={"k": 30})
        assert similar.status_code == 200 and 1 in [hit["id"] for hit in similar.json()["results"]]
        found = client.post("/search", files={"image": ("q.png", query_png(0), "image/png")}, params={"k": 30})
        assert found.status_code == 200
    done = _cli("search", str(fresh_index), "--id", "2", "-k", "30", "--json")
    assert done.returncode == 0, done.stderr
    assert "a\ufffdb" in done.stdout and "Traceback" not in done.stderr


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*RETRIEVAL, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("text", [LONE, NUL_KEY, NUL_VALUE, DEEP_ARRAYS])
def test_the_cli_refuses_hostile_filters_and_metadata_in_one_sentence(fresh_index: Path, text: str) -> None:
    searched = _cli("search", str(fresh_index), "--id", "1", "--filter", text)
    assert searched.returncode == 2 and searched.stderr.startswith("error: "), searched.stderr
    added = _cli("index", "add", str(fresh_index), "--data", str(fresh_index), "--metadata", text)
    assert added.returncode == 2 and added.stderr.startswith("error: "), added.stderr
    assert "Traceback" not in searched.stderr + added.stderr


def test_a_urlencoded_form_that_is_not_utf8_is_a_400(fresh_index: Path) -> None:
    """Issue 54: Starlette decoded b"caf%E9" to "caf\ufffd" (multipart and URLs answer 400 already)."""
    with serving_client(fresh_index) as client:
        for body in (b"text=caf%E9", b"k=3&filter=%7B%22a%22%3A%22%FF%22%7D", b"caf%E9=1"):
            response = client.post(
                "/search", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
            )
            assert "is not valid UTF-8 text" in _problem(response, 400), body
