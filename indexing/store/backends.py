"""The registry of index backends: the one place that maps a backend's name to its code.

``files`` (faiss + SQLite in the index directory: ``IndexStore``) and ``milvus`` (the items in a
Milvus collection: ``MilvusStore``). The manifest's ``backend`` picks how an index is opened
(``open_store``, the one way the service and the commands open an index); ``--backend`` picks where
a build or a merge writes (``index_target``). Both stores implement ``Store`` in full, and both
targets ``IndexTarget``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from retrieval.indexing.common.registry import Registry
from retrieval.indexing.store.files import files_target
from retrieval.indexing.store.files.faiss_kinds import IndexKind
from retrieval.indexing.store.files.files_target import FilesTarget
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.milvus import milvus_build
from retrieval.indexing.store.milvus.milvus_build import MilvusTarget
from retrieval.indexing.store.milvus.milvus_store import MilvusStore
from retrieval.indexing.store.shared.index_directory.index_dir import IndexContents
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest, load_index_manifest
from retrieval.indexing.store.shared.store_protocol import Store

FILES = "files"
"""The default backend (``--backend files``)."""


class StoreOpener(Protocol):
    def __call__(self, index_dir: Path, *, expected_model_sha256: str | None = None, force: bool = False) -> Store: ...


class IndexTarget(Protocol):
    """Where a new index is written: ``FilesTarget`` or ``MilvusTarget``."""

    def write(
        self, out_dir: Path, contents: IndexContents[tuple[IndexKind, IndexKind]], *, progress: bool = False
    ) -> IndexManifest:
        """Write the index of ``contents`` and swap its directory in at ``out_dir``."""
        ...


@dataclass(frozen=True)
class Backend:
    """How one backend opens an index, where it writes one, and how the commands describe it."""

    name: str
    open: StoreOpener
    target: Callable[[str | None, str | None, Path], IndexTarget]  # (--milvus-uri, --collection, --out)
    describe: Callable[[IndexManifest], str]  # where the items are, in the build and merge lines
    summary: Callable[[IndexManifest], str]  # the backend row of `retrieval index info`


BACKENDS: Registry[Backend] = Registry("index backend", ordered=True)
BACKENDS.register(FILES, Backend(FILES, IndexStore.open, FilesTarget.of, files_target.describe, files_target.summary))
BACKENDS.register(
    "milvus", Backend("milvus", MilvusStore.open, MilvusTarget.of, milvus_build.describe, milvus_build.summary)
)


def backend_of(manifest: IndexManifest) -> Backend:
    """The backend an index was built with."""
    return BACKENDS.get(manifest.backend)


def open_store(index_dir: Path, *, expected_model_sha256: str | None = None, force: bool = False) -> Store:
    """Open the index at ``index_dir`` with its manifest's backend, checking that it was built with the
    query model ``expected_model_sha256`` (unless ``force``)."""
    opener = backend_of(load_index_manifest(Path(index_dir))).open
    return opener(Path(index_dir), expected_model_sha256=expected_model_sha256, force=force)


def index_target(backend: str, uri: str | None, collection: str | None, out_dir: Path) -> IndexTarget:
    """Where ``--backend`` (with ``--milvus-uri`` and ``--collection``) writes the index ``out_dir``."""
    return BACKENDS.get(backend).target(uri, collection, Path(out_dir))
