"""The three files of one index segment (the base or a delta): embeddings and the two faiss indexes.

Every segment holds ``embeddings.f16.npy`` (float16, one row per item it was written with),
``float.faiss`` (``IndexIDMap2``) and ``binary.faiss`` (``IndexBinaryIDMap2``), under the same names:
the base at the top of the index directory, each delta in its own ``segments/NAME/`` folder
(``segments.py``). A missing, truncated or foreign file is an ``IndexFormatError`` naming it.
"""

from __future__ import annotations

import tokenize
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from retrieval.indexing.common.artifact_names import BINARY_INDEX_NAME, EMBEDDINGS_NAME, FLOAT_INDEX_NAME
from retrieval.indexing.common.atomic_write import atomic_paths, atomic_write_with
from retrieval.indexing.common.errors import IndexFormatError

REBUILD = "rebuild the index with `retrieval index build`"
SEGMENT_FILES = (EMBEDDINGS_NAME, FLOAT_INDEX_NAME, BINARY_INDEX_NAME)


def write_embeddings(directory: Path, embeddings: np.ndarray, *, chunk: int = 65_536) -> None:
    """``directory/embeddings.f16.npy``, converted to float16 ``chunk`` rows at a time (a memory map of
    a large float16 array is never copied whole). An array of at most one chunk (an add's delta) is
    converted at once and written as it is: the same bytes, without a memory map's ``msync`` before the
    ``fsync`` that ``atomic_write_with`` makes anyway."""

    def writer(tmp: Path) -> None:
        if len(embeddings) <= chunk and isinstance(embeddings, np.ndarray):  # also: an empty file cannot be mapped
            with open(tmp, "wb") as handle:
                np.save(handle, np.ascontiguousarray(embeddings, dtype=np.float16))
            return
        if len(embeddings) == 0:
            with open(tmp, "wb") as handle:
                np.save(handle, np.zeros(tuple(embeddings.shape), np.float16))
            return
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float16, shape=tuple(embeddings.shape))
        for start in range(0, len(embeddings), chunk):
            out[start : start + chunk] = embeddings[start : start + chunk]
        out.flush()
        del out

    atomic_write_with(Path(directory) / EMBEDDINGS_NAME, writer)


def load_embeddings(path: Path, dim: int) -> np.ndarray:
    """Memory-map a float16 (n, dim) embeddings file."""
    try:
        embeddings = np.load(path, mmap_mode="r")
    except FileNotFoundError:
        raise IndexFormatError(f"{path} is missing; {REBUILD}") from None
    except (ValueError, OSError, EOFError, SyntaxError, tokenize.TokenError) as error:  # a damaged header
        raise IndexFormatError(f"{path} is corrupt ({type(error).__name__}: {error}); {REBUILD}") from None
    if embeddings.ndim != 2 or embeddings.shape[1] != dim or embeddings.dtype != np.float16:
        raise IndexFormatError(f"{path} holds {embeddings.dtype} {embeddings.shape}, not float16 (n, {dim}); {REBUILD}")
    return embeddings


def write_faiss_files(directory: Path, float_index: faiss.Index, binary_index: faiss.IndexBinary) -> None:
    """Both indexes of a segment, each atomically (one directory fsync for the two)."""
    with atomic_paths([Path(directory) / FLOAT_INDEX_NAME, Path(directory) / BINARY_INDEX_NAME]) as (floats, codes):
        faiss.write_index(float_index, str(floats))
        faiss.write_index_binary(binary_index, str(codes))


def read_faiss_files(float_path: Path, binary_path: Path, dim: int, bits: int) -> tuple[Any, Any]:
    """Load both indexes of a segment (``IndexIDMap2``, ``IndexBinaryIDMap2``); a missing, truncated or
    foreign file names itself."""
    pairs = ((float_path, faiss.read_index, dim), (binary_path, faiss.read_index_binary, bits))
    loaded = []
    for path, reader, width in pairs:
        if not Path(path).is_file():
            raise IndexFormatError(f"{path} is missing; {REBUILD}")
        try:
            index = reader(str(path))
        except RuntimeError:
            raise IndexFormatError(f"{path} is corrupt or truncated; {REBUILD}") from None
        if index.d != width or not hasattr(index, "id_map"):
            raise IndexFormatError(f"{path} is not an id-mapped index of dimension {width}; {REBUILD}")
        loaded.append(index)
    return loaded[0], loaded[1]


def faiss_files_exist(directory: Path) -> bool:
    return all((Path(directory) / name).is_file() for name in (FLOAT_INDEX_NAME, BINARY_INDEX_NAME))
