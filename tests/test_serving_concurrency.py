"""Concurrent searches while items are added and removed: no errors, never a removed item after its delete."""

from __future__ import annotations

import threading
import time

import httpx
from index_fixtures import make_image
from serving_fixtures import API_KEY, GALLERY_SIZE, image_bytes, running_server

ROUNDS = 12
SEARCHERS = 4


def test_searches_stay_correct_during_adds_and_removes(fresh_index) -> None:
    # The query is the very image that gets added, so a live copy of it would always rank first.
    query = image_bytes(make_image(3, 500, size=(64, 64)))
    deleted_at: dict[int, float] = {}  # item id -> monotonic time its DELETE returned
    errors: list[str] = []
    searches: list[tuple[float, list[int]]] = []  # (time the request was sent, ids returned)
    done = threading.Event()

    def writer(base: str) -> None:
        with httpx.Client(base_url=base, headers={"X-API-Key": API_KEY}, timeout=30) as http:
            for round_ in range(ROUNDS):
                added = http.post(
                    "/items",
                    files=[("images", (f"{round_}.png", query, "image/png"))],
                    data={"labels": f"round-{round_}"},
                )
                if added.status_code != 201:
                    errors.append(f"add: {added.status_code} {added.text}")
                    break
                (item_id,) = added.json()["ids"]
                time.sleep(0.05)  # give searches a chance to see the live item
                removed = http.delete(f"/items/{item_id}")
                deleted_at[item_id] = time.monotonic()
                if removed.status_code != 200:
                    errors.append(f"delete: {removed.status_code} {removed.text}")
        done.set()

    def searcher(base: str, kind: str) -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            while not done.is_set():
                sent = time.monotonic()
                response = http.post(
                    "/search", params={"k": 3, "index": kind}, files={"image": ("q.png", query, "image/png")}
                )
                if response.status_code != 200:
                    errors.append(f"search: {response.status_code} {response.text}")
                    continue
                searches.append((sent, [hit["id"] for hit in response.json()["results"]]))

    with running_server(fresh_index, batch_max_wait_ms=2) as base:
        threads = [threading.Thread(target=writer, args=(base,))]
        threads += [
            threading.Thread(target=searcher, args=(base, ("float", "binary")[i % 2])) for i in range(SEARCHERS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        count = httpx.get(f"{base}/readyz").json()["count"]
        metrics = httpx.get(f"{base}/metrics").text

    assert not errors, errors[:3]
    assert len(deleted_at) == ROUNDS and count == GALLERY_SIZE
    assert len(searches) >= ROUNDS, "the searchers should have run throughout"
    stale = [(ids, item) for sent, ids in searches for item, gone in deleted_at.items() if sent > gone and item in ids]
    assert not stale, f"a search sent after a delete returned still found the deleted item: {stale[:3]}"
    seen_live = sum(1 for _, ids in searches if any(item in ids for item in deleted_at))
    assert seen_live > 0, "some searches should have found an added item while it was live"
    assert 'route="/search",status="200"' in metrics
