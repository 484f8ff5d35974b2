"""The raw (not augmented) embeddings of a DBA index (``index build --dba N``), by item id.

A DBA index stores and searches augmented vectors (``search/postprocess.augment_database``); the raw
ones are kept beside them in ``raw/`` so that an add augments its new items from their neighbours' raw
vectors, and a full compaction re-augments every item from scratch. Each write is one chunk,
``raw/gNNNNNNNN.ids.npy`` + ``.f16.npy`` (float16, as the segments store embeddings), named after the
generation that wrote it. Chunks may overlap (a compaction writes all live items into one new chunk
before its commit, then deletes the others; an upsert gives a kept id a new raw vector): the newest
chunk that holds an id holds its value. An add writes its chunk right after its commit; an id no chunk holds (a writer
killed in between) reads as its stored vector, the augmented one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import RAW_VECTORS_SUBDIR
from retrieval.indexing.common.atomic_write import atomic_write_with

_IDS, _VECTORS = ".ids.npy", ".f16.npy"


def _chunk(index_dir: Path, generation: int) -> Path:
    return Path(index_dir) / RAW_VECTORS_SUBDIR / f"g{generation:08d}"


def write_raw(index_dir: Path, generation: int, ids: np.ndarray, vectors: np.ndarray) -> None:
    """One chunk of raw vectors (the vectors first: a chunk counts once its ids are there)."""
    base = _chunk(index_dir, generation)
    base.parent.mkdir(parents=True, exist_ok=True)
    values = np.asarray(vectors, np.float16)
    atomic_write_with(base.with_name(base.name + _VECTORS), lambda tmp: _save(tmp, values))
    atomic_write_with(base.with_name(base.name + _IDS), lambda tmp: _save(tmp, np.asarray(ids, np.int64)))


def read_raw(index_dir: Path, ids: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """float32 raw vectors of ``ids`` (any order); ``stored`` (their stored vectors, same order) fills in
    ids that no chunk holds."""
    wanted = np.asarray(ids, np.int64)
    out = np.asarray(stored, np.float32).copy()
    missing = np.ones(len(wanted), bool)
    for ids_file in sorted((Path(index_dir) / RAW_VECTORS_SUBDIR).glob("g*" + _IDS), reverse=True):
        chunk_ids = np.load(ids_file)
        where = np.flatnonzero(missing & np.isin(wanted, chunk_ids))
        if len(where):
            order = np.argsort(chunk_ids)
            rows = order[np.searchsorted(chunk_ids, wanted[where], sorter=order)]
            vectors = np.load(ids_file.with_name(ids_file.name.replace(_IDS, _VECTORS)), mmap_mode="r")
            out[where], missing[where] = vectors[rows], False
    return out


def keep_only(index_dir: Path, generation: int) -> None:
    """Delete every chunk but ``generation``'s (after a full compaction wrote all live items into it)."""
    folder = Path(index_dir) / RAW_VECTORS_SUBDIR
    for path in folder.glob("g*.npy"):
        if not path.name.startswith(_chunk(index_dir, generation).name + "."):
            path.unlink(missing_ok=True)


def _save(path: Path, values: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.save(handle, values)
