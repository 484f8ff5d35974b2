"""The loaded model and index, owned by one thread, swapped atomically on reload.

``IndexStore`` is not thread-safe (its SQLite connection even refuses other threads),
so each snapshot owns a single "store thread": the store is opened there and every
read or write of it runs there, in arrival order. That makes every operation atomic
with respect to the others, and a search submitted after a delete returned never sees
the deleted item. onnxruntime uses all cores *inside* one call; faiss runs on
``search_threads`` (1) OpenMP threads of the store thread: one query at a time gains little
from more, and their spin-waiting would take the cores from onnxruntime and decoding.

A reload opens a fresh embedder + store from disk on a new store thread *beside* the
serving one, then replaces one reference: requests already queued finish on the old
snapshot, new ones see the new snapshot, nobody sees a half-loaded index. Writes and
reloads are serialised, so an add is never lost between "reload read the disk" and "swap".

A request holds its snapshot (``hold``) from the first use to the last; a replaced snapshot is
retired as soon as nobody holds it: its store is closed on its own thread (after the work queued
there), the thread ends and the model is released. So reloads leave open files, threads and memory
where they were, however often they come (``tests/test_serving_reload_resources.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import faiss

from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR
from retrieval.indexing.common.directory_moves import moves_journal
from retrieval.indexing.exported_model.no_model import NoModel, has_model
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.text_encoder import TextEncoder, text_encoder_of
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.maintenance.load_checks import check_on_load
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest
from retrieval.indexing.store.shared.store_protocol import Store
from retrieval.serving.glibc_malloc import release_free_memory
from retrieval.serving.http.service_errors import RetryLaterError
from retrieval.serving.settings import ServeSettings

T = TypeVar("T")
_log = logging.getLogger("retrieval.serving")


@dataclass
class _Usage:
    """How many requests hold a snapshot, and whether it has been replaced (event-loop thread only)."""

    holders: int = 0
    replaced: bool = False
    closed: bool = False


@dataclass(frozen=True)
class Snapshot:
    """One consistent (model, index) pair; ``store`` may only be used on ``store_thread``."""

    embedder: OnnxEmbedder | NoModel
    store: Store
    generation: int
    store_thread: ThreadPoolExecutor = field(compare=False, repr=False)
    usage: _Usage = field(default_factory=_Usage, compare=False, repr=False)
    text: TextEncoder | None = field(default=None, compare=False, repr=False)
    """The model's text tower (``text.onnx`` + ``tokenizer.json``, checked against model.json at load); None
    when it has none."""


def open_snapshot(settings: ServeSettings, generation: int) -> Snapshot:
    """Load ``INDEX_DIR/model`` and the index built with it on a new store thread (blocking)."""
    thread = ThreadPoolExecutor(
        max_workers=1,
        thread_name_prefix=f"store-{generation}",
        # OpenMP's thread count is per calling thread: this limits faiss in the store thread only.
        initializer=faiss.omp_set_num_threads,
        initargs=(settings.search_threads,),
    )
    try:
        embedder, store = thread.submit(_open_pair, settings).result()
    except BaseException:
        thread.shutdown(wait=False)
        raise
    try:
        text = _text_encoder(settings, embedder)
    except BaseException:
        embedder.close()
        thread.submit(_close_store, store)
        thread.shutdown(wait=False)
        raise
    return Snapshot(embedder=embedder, store=store, generation=generation, store_thread=thread, text=text)


def _text_encoder(settings: ServeSettings, embedder: OnnxEmbedder | NoModel) -> TextEncoder | None:
    """The text side of the index's model copy, its files checked against model.json; None without one."""
    if embedder.manifest.text is None or isinstance(embedder, NoModel):
        return None
    return text_encoder_of(settings.index_dir / INDEX_MODEL_SUBDIR, embedder.manifest, threads=settings.threads)


SWITCH_ATTEMPTS = 20  # loads tried while a switch renames the index directory (issue 44)
SWITCH_WAIT_S = 0.1  # between them: a switch's two renames take milliseconds


def _open_pair(settings: ServeSettings) -> tuple[OnnxEmbedder | NoModel, Store]:
    """The model and index of one generation. ``index rebuild`` (or ``switch``, ``rollback``) renames the
    index directory while the service may be reading it: a load during which the directory was replaced
    (or missing) may pair the old model with the new index, so it is made again, and a load that keeps
    losing that race is a RetryLaterError that says to retry, not a model mismatch."""
    for _ in range(SWITCH_ATTEMPTS):
        before = _identity(settings.index_dir)
        try:
            pair = _open_pair_once(settings)
        except Exception:
            if not _switched(settings.index_dir, before):
                raise  # no switch: the index or model is what is wrong
        else:
            if not _switched(settings.index_dir, before):
                return pair
            pair[0].close()
            _close_store(pair[1])
        time.sleep(SWITCH_WAIT_S)
    raise RetryLaterError(
        f"{settings.index_dir} was being switched to another generation (index rebuild, switch or rollback) "
        "while the service loaded it; retry the reload in a moment",
        retry_after_s=1,
    )


def _switched(index_dir: Path, before: tuple[int, int] | None) -> bool:
    """Whether another directory took ``index_dir``'s place since ``before``, or a switch has it moved away."""
    after = _identity(index_dir)
    return after != before or (after is None and moves_journal(index_dir).exists())


def _identity(index_dir: Path) -> tuple[int, int] | None:
    """Which directory ``index_dir`` is (a switch puts another one in its place); None while it is missing."""
    try:
        found = os.stat(index_dir)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _open_pair_once(settings: ServeSettings) -> tuple[OnnxEmbedder | NoModel, Store]:
    index = load_index_manifest(settings.index_dir)  # "not an index directory" before any model error
    embedder: OnnxEmbedder | NoModel = NoModel(index.model, settings.index_dir)  # built from vectors alone
    if has_model(index.model):
        embedder = OnnxEmbedder(
            settings.index_dir / INDEX_MODEL_SUBDIR, threads=settings.threads, spin_wait=settings.onnx_spin_wait
        )
    try:
        check_on_load(settings.index_dir, embedder.manifest, verify=settings.verify_on_load)
        return embedder, open_store(settings.index_dir, expected_model_sha256=embedder.model_sha256)
    except BaseException:
        embedder.close()
        raise


class ServiceState:
    """Holds the current snapshot; none until the first load succeeds."""

    def __init__(self, settings: ServeSettings, on_change: Callable[[Snapshot, int], None] | None = None):
        self.settings = settings
        self.load_error: str | None = None
        self.item_count = 0
        self._snapshot: Snapshot | None = None
        self._mutation = asyncio.Lock()
        self._on_change = on_change or (lambda snapshot, count: None)

    @property
    def ready(self) -> bool:
        return self._snapshot is not None

    def current(self) -> Snapshot:
        """The serving snapshot; RetryLaterError while the index is loading or failed to load."""
        snapshot = self._snapshot
        if snapshot is None:
            reason = self.load_error or "the model and index are still loading; retry in a moment"
            raise RetryLaterError(f"The service is not ready: {reason}", retry_after_s=2)
        return snapshot

    async def load(self) -> Snapshot:
        """(Re)load from disk and swap atomically; on failure the old snapshot keeps serving."""
        async with self._mutation:
            old = self._snapshot
            generation = old.generation + 1 if old else 1
            try:
                snapshot = await asyncio.to_thread(open_snapshot, self.settings, generation)
            except Exception as error:
                self.load_error = str(error)
                raise
            self._snapshot, self.load_error = snapshot, None
            if old is not None:  # closed now, or when the last request holding it is done
                old.usage.replaced = True
                _retire_if_unused(old)
            count = await self.read(lambda snap: snap.store.count, snapshot)
        self._changed(snapshot, count)
        _log.info("serving %s (generation %d, %d items)", self.settings.index_dir, generation, count)
        return snapshot

    @contextmanager
    def hold(self) -> Iterator[Snapshot]:
        """The serving snapshot, kept open until the block ends even if a reload replaces it meanwhile.
        A request that uses the snapshot more than once (embed, then search) holds it throughout."""
        snapshot = self.current()
        snapshot.usage.holders += 1
        try:
            yield snapshot
        finally:
            snapshot.usage.holders -= 1
            _retire_if_unused(snapshot)

    async def read(self, use: Callable[[Snapshot], T], snapshot: Snapshot | None = None) -> T:
        """Run ``use(snapshot)`` on the store thread.

        Pass the snapshot whose model embedded the query (held by the caller), so a reload in
        between never searches one model's vector in another model's index; without one, the
        serving snapshot is held for this call.
        """
        if snapshot is not None:
            return await asyncio.wrap_future(_submit(snapshot, use))
        with self.hold() as held:
            return await asyncio.wrap_future(_submit(held, use))

    async def write(self, change: Callable[[Snapshot], T]) -> T:
        """Run ``change(snapshot)`` on the store thread, never concurrently with a reload."""
        async with self._mutation:
            with self.hold() as snapshot:  # the size after the change, read in the same trip to the store thread
                result, count = await asyncio.wrap_future(
                    _submit(snapshot, lambda snap: (change(snap), snap.store.count))
                )
        self._changed(snapshot, count)
        return result

    def _changed(self, snapshot: Snapshot, count: int) -> None:
        if snapshot is self._snapshot:
            self.item_count = count
            self._on_change(snapshot, count)

    def close(self) -> None:
        """Close the serving snapshot (at shutdown): its store after the work queued on its thread."""
        if self._snapshot is not None:
            self._snapshot.usage.replaced = True
            _retire(self._snapshot)
            self._snapshot = None


def _submit(snapshot: Snapshot, use: Callable[[Snapshot], T]) -> Future[T]:
    try:
        return snapshot.store_thread.submit(use, snapshot)
    except RuntimeError:  # the snapshot was retired: this request outlived a reload
        raise RetryLaterError("the index was reloaded during this request; send it again", retry_after_s=1) from None


def _retire_if_unused(snapshot: Snapshot) -> None:
    if snapshot.usage.replaced and snapshot.usage.holders == 0:
        _retire(snapshot)


def _retire(snapshot: Snapshot) -> None:
    """Drop the model, close the store on its own thread after the work queued there, end the thread, and
    hand the memory they freed back to the system."""
    if snapshot.usage.closed:
        return
    snapshot.usage.closed = True
    snapshot.embedder.close()
    if snapshot.text is not None:
        snapshot.text.close()
    snapshot.store_thread.submit(_close_store, snapshot.store)
    snapshot.store_thread.shutdown(wait=False)  # queued work still runs, then the thread ends


def _close_store(store: Store) -> None:
    try:
        store.close()
    except Exception as error:  # noqa: BLE001 - a retired store that fails to close must not stop the service
        _log.warning("closing a retired index snapshot failed: %s", error)
    release_free_memory()
