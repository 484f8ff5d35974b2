"""Items under their own keys over HTTP (POST /items with key fields, GET / PUT / DELETE /items/by-key/{key}),
the one vocabulary of upload fields (the old names still work, with a Deprecation header) and the setting
that keeps the server's paths private."""

from __future__ import annotations

from pathlib import Path

import pytest
from index_fixtures import make_image
from serving_fixtures import API_KEY, image_bytes, query_png, serving_client

from retrieval.indexing.store.files.index_store import IndexStore

AUTH = {"X-API-Key": API_KEY}
UPLOADS = "uploads"


def _image(class_index: int, item: int, name: str = "x.png") -> tuple[str, bytes, str]:
    return (name, image_bytes(make_image(class_index, item)), "image/png")


def _uploads(index_dir: Path) -> set[str]:
    return {path.name for path in (index_dir / UPLOADS).glob("*")} if (index_dir / UPLOADS).is_dir() else set()


def test_post_with_keys_then_get_put_delete_by_key(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        files = [("image", _image(1, 60 + i, f"n{i}.png")) for i in range(2)]
        added = client.post("/items", files=files, data={"label": "new", "key": ["sku-1", "a/b ü"]}, headers=AUTH)
        assert added.status_code == 201 and "deprecation" not in added.headers, added.text
        first, second = added.json()["ids"]
        item = client.get("/items/by-key/a/b ü").json()
        assert (item["id"], item["key"], item["label"]) == (second, "a/b ü", "new")
        assert client.get(f"/items/{first}").json()["key"] == "sku-1"
        hits = client.post("/search", files={"image": _image(1, 60)}, params={"k": 1}).json()["results"]
        assert (hits[0]["id"], hits[0]["key"]) == (first, "sku-1")
        page = client.get("/items", params={"filter": '{"label": "new"}'}).json()["items"]
        assert [(row["id"], row["key"]) for row in page] == [(first, "sku-1"), (second, "a/b ü")]

        with IndexStore.open(fresh_index) as store:
            old_upload = Path(store.item(first).path).name
        created = client.put("/items/by-key/sku-2", files={"image": _image(2, 70)}, data={"label": "two"}, headers=AUTH)
        assert created.status_code == 201 and created.json()["replaced"] is None, created.text
        replaced = client.put(
            "/items/by-key/sku-1",
            files={"image": _image(3, 71, "swap.png")},
            data={"label": "swapped", "metadata": '{"v": 2}'},
            headers=AUTH,
        )
        assert replaced.status_code == 200, replaced.text
        body = replaced.json()
        assert body["replaced"] == first and body["id"] == first and body["count"] == 30 + 3  # the id survives
        now = client.get("/items/by-key/sku-1").json()
        assert (now["id"], now["label"], now["metadata"]) == (first, "swapped", {"v": 2, "filename": "swap.png"})
        assert client.get(f"/items/{first}").json() == now
        assert old_upload not in _uploads(fresh_index)  # the replaced image's stored copy is gone

        deleted = client.delete("/items/by-key/sku-1", headers=AUTH)
        assert deleted.json() == {"id": body["id"], "key": "sku-1", "count": 30 + 2}
        for call in (client.get("/items/by-key/sku-1"), client.delete("/items/by-key/sku-1", headers=AUTH)):
            assert (
                call.status_code == 404
                and call.json()["detail"] == "there is no item with the key 'sku-1' in the index."
            )
        assert client.put("/items/by-key/k", files={"image": _image(1, 1)}, data={"label": "x"}).status_code == 401
        assert client.get(f"/items/{second}/similar").status_code == 200  # integer ids stay valid


def test_a_colliding_or_bad_key_is_refused_and_writes_nothing(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        first = client.post("/items", files={"image": _image(1, 80)}, data={"label": "a", "key": "k1"}, headers=AUTH)
        assert first.status_code == 201
        before = (client.get("/readyz").json()["count"], _uploads(fresh_index))
        files = [("image", _image(2, 81 + i)) for i in range(2)]
        taken = client.post("/items", files=files, data={"label": "b", "key": ["k2", "k1"]}, headers=AUTH)
        assert taken.status_code == 409, taken.text
        (item_id,) = first.json()["ids"]
        assert taken.json()["detail"].startswith(f'the key "k1" is already item {item_id}\'s;')
        twice = client.post("/items", files=files, data={"label": "b", "key": ["k3", "k3"]}, headers=AUTH)
        assert twice.status_code == 409 and "given to more than one image" in twice.json()["detail"]
        for keys, message in (
            (["", "k"], "the key is empty"),
            (["k\tx", "k"], "control character"),
            (["x" * 257, "k"], "at most 256 characters"),
            (["k4"], "got 1 keys for 2 images"),
        ):
            bad = client.post("/items", files=files, data={"label": "b", "key": keys}, headers=AUTH)
            assert bad.status_code == 422 and message in bad.json()["detail"], bad.text
        long_key = "/items/by-key/" + "x" * 257
        for call in (client.get(long_key), client.delete(long_key, headers=AUTH)):
            assert call.status_code == 422 and "at most 256 characters" in call.json()["detail"]
        assert (client.get("/readyz").json()["count"], _uploads(fresh_index)) == before


def test_old_field_names_still_add_with_a_deprecation_header(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        old = client.post("/items", files={"images": _image(1, 90)}, data={"labels": "old"}, headers=AUTH)
        assert old.status_code == 201, old.text
        assert old.headers["deprecation"] == "@1795737600" and 'rel="deprecation"' in old.headers["link"]
        assert client.get(old.headers["link"][1:].split("#")[0]).status_code == 200  # the API page it names
        assert "form field 'images' is deprecated; send one 'image' field per item" in old.headers["warning"]
        assert "form field 'labels' is deprecated" in old.headers["warning"]
        new = client.post("/items", files={"image": _image(1, 91)}, data={"label": "new"}, headers=AUTH)
        assert new.status_code == 201 and "deprecation" not in new.headers and "warning" not in new.headers
        labels = {row["value"]: row["count"] for row in client.get("/labels").json()["values"]}
        assert labels["old"] == 1 and labels["new"] == 1
        both = client.post(
            "/items", files=[("image", _image(1, 92)), ("images", _image(1, 93))], data={"label": "x"}, headers=AUTH
        )
        assert both.status_code == 422 and "send the form field 'image' only" in both.json()["detail"]
        none = client.post("/items", data={"label": "x"}, headers=AUTH)
        assert none.status_code == 422 and "send at least one form field 'image'" in none.json()["detail"]


@pytest.mark.parametrize(
    ("settings", "full"),
    [
        ({}, False),  # an API key: paths hidden
        ({"api_key": None}, True),  # no API key: shown
        ({"show_paths": True}, True),
        ({"api_key": None, "show_paths": False}, False),
    ],
    ids=["api-key", "no-key", "shown", "hidden"],
)
def test_paths_are_private_by_default_with_an_api_key(tiny_index_template: Path, settings: dict, full: bool) -> None:
    with IndexStore.open(tiny_index_template) as store:
        stored = {item.id: item.path for item in store.all_items()}
    with serving_client(tiny_index_template, **settings) as client:
        hit = client.post("/search", files={"image": ("q.png", query_png(0), "image/png")}).json()["results"][0]
        similar = client.get(f"/items/{hit['id']}/similar", params={"k": 1}).json()["results"][0]
        batch = client.post("/search", files=[("image", ("q.png", query_png(0), "image/png"))] * 2).json()["batch"]
        shown = {
            hit["id"]: [hit["path"], client.get(f"/items/{hit['id']}").json()["path"]]
            + [query["results"][0]["path"] for query in batch],
            similar["id"]: [similar["path"]],
            1: [client.get("/items", params={"limit": 1}).json()["items"][0]["path"]],
        }
    for item_id, paths in shown.items():
        want = stored[item_id] if full else Path(stored[item_id]).name
        assert paths == [want] * len(paths) and Path(stored[item_id]).is_absolute()


def test_hostile_keys_in_the_path_are_4xx(tiny_index_template: Path) -> None:
    keys = ["%00", "%0A", "%ff", "%ed%a0%80", "a%2F..%2F..%2Fetc", "%25", "x" * 5000, "%20", "a?b=1", "%C0%AF"]
    with serving_client(tiny_index_template) as client:
        for key in keys:
            for method in ("GET", "DELETE", "PUT"):
                response = client.request(method, f"/items/by-key/{key}", headers=AUTH)
                assert 400 <= response.status_code < 500, (method, key, response.status_code, response.text)
        assert client.get("/items/by-key/").status_code == 422  # the empty key


def test_a_retried_keyed_add_gets_its_first_answer_not_a_conflict(fresh_index: Path) -> None:
    with serving_client(fresh_index) as client:
        retry = {"files": {"image": _image(1, 95)}, "data": {"label": "a", "key": "once"}}
        headers = {**AUTH, "Idempotency-Key": "request-1"}
        first, second = (client.post("/items", headers=headers, **retry) for _ in range(2))
        assert first.status_code == second.status_code == 201 and first.json() == second.json()
        other = client.post("/items", headers={**AUTH, "Idempotency-Key": "request-2"}, **retry)
        assert other.status_code == 409  # another request with the same key
