"""Reloads release what they replace: the retired snapshot's item table is closed and its store thread
ends once the requests that hold it are done (never before), so open files and threads stay flat."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

from serving_fixtures import API_KEY, serving_client

from retrieval.indexing.common.artifact_names import ITEMS_DB_NAME
from retrieval.serving.service_state import ServiceState
from retrieval.serving.settings import make_settings

KEY = {"X-API-Key": API_KEY}
RELOADS = 12


def open_item_tables(index_dir: Path) -> int:
    """File descriptors of this process open on ``index_dir``'s item table."""
    target = str((index_dir / ITEMS_DB_NAME).resolve())
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:
            pass
    return count


def store_threads() -> int:
    return sum(thread.name.startswith("store-") for thread in threading.enumerate())


def _settle(index_dir: Path, expected: int, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while (found := open_item_tables(index_dir)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def test_reloads_leave_open_files_and_store_threads_where_they_were(fresh_index: Path) -> None:
    # The default request timeout (30 s) is longer than this test: nothing may wait for it.
    with serving_client(fresh_index) as client:
        assert open_item_tables(fresh_index) == 1
        for _ in range(RELOADS):
            assert client.post("/admin/reload", headers=KEY).status_code == 200
        assert _settle(fresh_index, 1) == 1
        deadline = time.monotonic() + 10
        while store_threads() > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store_threads() == 1
        assert client.get("/items/1").status_code == 200  # the current snapshot still serves


def test_a_request_holding_the_old_snapshot_finishes_on_it_before_it_is_closed(fresh_index: Path) -> None:
    state = ServiceState(make_settings(index_dir=fresh_index))

    async def scenario() -> tuple[int, int, int]:
        await state.load()
        started = threading.Event()

        def slow_count(snapshot) -> int:
            started.set()
            time.sleep(0.5)
            return snapshot.store.count  # a closed item table would raise here

        with state.hold() as old:
            pending = asyncio.ensure_future(state.read(slow_count, old))
            await asyncio.to_thread(started.wait, 5)
            await state.load()  # the reload swaps while the old snapshot is still in use
            during = open_item_tables(fresh_index)
            count = await pending
        await asyncio.sleep(0.2)
        return count, during, open_item_tables(fresh_index)

    try:
        count, during, after = asyncio.run(scenario())
    finally:
        state.close()
    assert count > 0
    assert during == 2  # the old snapshot stays open while it is held
    assert after == 1  # and is closed once it is not


def test_the_service_caps_malloc_arenas_as_set(monkeypatch, tmp_path: Path) -> None:
    """The heap of a service whose threads come and go fragments across arenas (bench/bench_soak.py)."""
    from retrieval.serving import app as app_module
    from retrieval.serving.glibc_malloc import limit_malloc_arenas, release_free_memory

    capped: list[int] = []
    monkeypatch.setattr(app_module, "limit_malloc_arenas", capped.append)
    app_module.create_app(make_settings(index_dir=tmp_path))
    app_module.create_app(make_settings(index_dir=tmp_path, malloc_arenas=4))
    app_module.create_app(make_settings(index_dir=tmp_path, malloc_arenas=None))
    assert capped == [2, 4]
    if Path("/lib/x86_64-linux-gnu/libc.so.6").exists() or Path("/usr/lib64/libc.so.6").exists():
        assert limit_malloc_arenas(8) is True and release_free_memory() in (True, False)  # glibc has both
