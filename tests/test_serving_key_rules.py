"""Keys that cannot collide and requests that are not guessed (issue 44, findings 2, 6, 8 and 9): a path
that is not UTF-8 is a 400 for every method, keys are one NFC key whichever form they came in, blank and
invisible keys are refused, CORS allows every method and header the routes use, and ambiguous forms and
filters are 422s naming the field."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from index_fixtures import make_image
from serving_fixtures import API_KEY, image_bytes, serving_client

AUTH = {"X-API-Key": API_KEY}
NFC, NFD = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")


def _image(item: int, name: str = "x.png") -> tuple[str, bytes, str]:
    return (name, image_bytes(make_image(1, item)), "image/png")


def test_a_path_that_is_not_utf8_is_refused_and_collides_with_nothing(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        count = client.get("/readyz").json()["count"]
        for raw in ("%FF%FE", "%FE%FF", "%C0%AF", "%ED%A0%80", "ok%FF"):
            put = client.put(f"/items/by-key/{raw}", files={"image": _image(1)}, data={"label": "a"}, headers=AUTH)
            assert put.status_code == 400 and "not valid UTF-8" in put.json()["detail"], (raw, put.text)
            for method in ("GET", "DELETE"):
                answer = client.request(method, f"/items/by-key/{raw}", headers=AUTH)
                assert answer.status_code == 400 and answer.json()["detail"] == put.json()["detail"], raw
        assert client.get("/readyz").json()["count"] == count
        bad_query = client.get("/items", params={"filter": b'{"label": "\xff"}'.decode("latin-1")})
        assert bad_query.status_code == 200  # latin-1 text sent as UTF-8 is valid UTF-8
        assert client.get("/items?filter=%FF").status_code == 400
        replacement = client.put(
            "/items/by-key/%EF%BF%BD", files={"image": _image(2)}, data={"label": "a"}, headers=AUTH
        )
        assert replacement.status_code == 201 and replacement.json()["key"] == "\ufffd"  # U+FFFD sent as UTF-8


def test_nfc_and_nfd_spellings_are_one_key_at_every_door(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        added = client.post("/items", files={"image": _image(3)}, data={"label": "a", "key": NFD}, headers=AUTH)
        assert added.status_code == 201, added.text
        (item_id,) = added.json()["ids"]
        for spelling in (NFC, NFD):
            found = client.get(f"/items/by-key/{spelling}").json()
            assert (found["id"], found["key"]) == (item_id, NFC)
        again = client.post("/items", files={"image": _image(4)}, data={"label": "a", "key": NFC}, headers=AUTH)
        assert again.status_code == 409 and f"is already item {item_id}" in again.json()["detail"]
        put = client.put(f"/items/by-key/{NFC}", files={"image": _image(5)}, data={"label": "b"}, headers=AUTH)
        assert put.status_code == 200 and put.json()["replaced"] == item_id and put.json()["key"] == NFC
        gone = client.delete(f"/items/by-key/{NFD}", headers=AUTH)
        assert gone.status_code == 200 and gone.json()["id"] == put.json()["id"]


def test_blank_and_invisible_keys_are_refused_with_one_sentence(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        count = client.get("/readyz").json()["count"]
        for key, words in ((" ", "is blank"), ("\u200b", "is blank"), ("\u3164", "is blank"), ("a\u200bb", "U+200B")):
            form = client.post("/items", files={"image": _image(6)}, data={"label": "a", "key": key}, headers=AUTH)
            assert form.status_code == 422 and words in form.json()["detail"], (key, form.text)
            assert form.json()["detail"].startswith("form field 'key': the key ")
            put = client.put(f"/items/by-key/{key}", files={"image": _image(6)}, data={"label": "a"}, headers=AUTH)
            assert put.status_code == 422 and words in put.json()["detail"], (key, put.text)
        assert client.get("/readyz").json()["count"] == count
        joined = client.put("/items/by-key/a\u200db", files={"image": _image(7)}, data={"label": "a"}, headers=AUTH)
        assert joined.status_code == 201  # a joiner inside a key (emoji, Persian, Indic words) stays allowed


def test_cors_preflights_allow_every_method_and_header_the_routes_use(tiny_index_template: Path) -> None:
    origin = "http://example.org"
    cases = [
        ("/items/by-key/sku-1", "PUT", "x-api-key, content-type"),
        ("/items", "POST", "x-api-key, idempotency-key"),
        ("/items/by-key/sku-1", "DELETE", "x-api-key"),
        ("/search", "POST", "content-type"),
    ]
    with serving_client(tiny_index_template, cors_origins=[origin]) as client:
        for path, method, headers in cases:
            preflight = {"Origin": origin, "Access-Control-Request-Method": method}
            answer = client.options(path, headers={**preflight, "Access-Control-Request-Headers": headers})
            assert answer.status_code == 200, (path, method, answer.text)
            allowed = answer.headers["access-control-allow-headers"].lower()
            assert method in answer.headers["access-control-allow-methods"]
            assert all(header.strip() in allowed for header in headers.split(",")), allowed
        refused = client.options("/items", headers={**preflight, "Access-Control-Request-Headers": "x-made-up"})
        assert refused.status_code == 400  # a header no route reads stays refused


def test_ambiguous_requests_are_refused_naming_the_field(fresh_index: Path) -> None:
    image = _image(8)
    with serving_client(fresh_index) as client:
        count = client.get("/readyz").json()["count"]
        cases = [
            ("PUT", "/items/by-key/k1", [("image", image), ("image", _image(9))], {"label": "a"}, "form field 'image'"),
            ("PUT", "/items/by-key/k1", {"image": image}, {"label": ["a", "b"]}, "form field 'label'"),
            ("PUT", "/items/by-key/k1", {"image": image}, {"label": "a", "key": "k2"}, "form field 'key'"),
            ("POST", "/search?k=3", {"image": image}, {"k": "5"}, "'k' was sent both"),
            ("POST", "/search", {"image": image}, {"k": ["3", "5"]}, "form field 'k'"),
            ("POST", "/search", {"image": image}, {"filter": '{"label": "a", "label": "b"}'}, 'the key "label" twice'),
            ("POST", "/items", {"image": image}, {"label": "a", "metadata": '{"v": 1, "v": 2}'}, 'key "v" twice'),
        ]
        for method, path, files, data, words in cases:
            answer = client.request(method, path, files=files, data=data, headers=AUTH)
            assert answer.status_code == 422 and words in answer.json()["detail"], (path, data, answer.text)
        listed = client.get("/items", params={"filter": '{"label": {"$in": ["a"], "$in": ["b"]}}'})
        assert listed.status_code == 422 and 'the key "$in" twice' in listed.json()["detail"]
        assert client.get("/readyz").json()["count"] == count
        several = client.post("/search", files=[("image", image), ("image", _image(9))], params={"k": 2})
        assert several.status_code == 200 and len(several.json()["batch"]) == 2  # a batch takes several images
