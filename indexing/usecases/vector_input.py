"""Vectors made elsewhere (an edge device, a batch job, another service that ran the model), checked
before anything is written or searched: the rules every door (HTTP JSON, the CLI's ``--vector``, the
Python API's ``vectors=``) applies the same way.

A vector is a row of the model's dimension, every value finite and not all zero. The stores compare
vectors by inner product, so a row whose L2 norm is off by more than ``NORM_TOLERANCE`` is normalised
(``CheckedVectors.normalised`` says how many, for the response to say so); a row within it is kept
exactly as given, so a vector that the index's model produced gives the same binary code as the image
it came from, bit for bit (the sign threshold is applied to the very same float32 values; any
whitening or ITQ stage is part of the exported model, upstream of the vector). ``model``, when given, is
the sha256 of the model that made the vectors or its first ``MODEL_PREFIX`` characters; another model's
is a ModelMismatchError naming both.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexing.common.errors import DataError, ModelMismatchError
from retrieval.indexing.data.records import ImageRecord, key_problem, label_problem
from retrieval.indexing.store.shared.items.item_filter import check_metadata
from retrieval.indexing.store.shared.items.item_paths import VECTOR_ITEM_PATH

NORM_TOLERANCE = 1e-3
"""A row whose L2 norm is within this of 1 is kept exactly as given; another one is normalised."""
MODEL_PREFIX = 12
"""The shortest prefix of a model's sha256 that names it (the length ``retrieval index info`` shows)."""
DEFAULT_LABEL = "unlabelled"
"""The label of a vector added without one (every item has a class label: ``/labels`` counts them)."""
VECTOR_PATH = Path(VECTOR_ITEM_PATH)
"""The path of an item added by its vector: it has no image (its thumbnail and image are 404s)."""


@dataclass(frozen=True)
class CheckedVectors:
    """(n, dim) float32 unit rows, and how many of them had to be normalised."""

    vectors: np.ndarray
    normalised: int = 0


def checked_vectors(values: Any, dim: int, *, what: str = "vector") -> CheckedVectors:
    """The rows of ``values`` (one vector or a list of them) as unit float32 rows of length ``dim``; a
    wrong length, a value that is not a finite number or an all-zero row is a DataError naming the row."""
    try:  # float32 at once: the rounding of each value is the one a float64 detour would give
        with np.errstate(over="ignore"):
            array = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise DataError(f"each {what} must be a list of {dim} numbers") from None
    vectors = array[None] if array.ndim == 1 else array
    if vectors.ndim != 2 or vectors.shape[1] != dim or len(vectors) == 0:
        shape = vectors.shape
        got = "no vector" if vectors.size == 0 else f"{shape[-1]} numbers" if vectors.ndim == 2 else "nested lists"
        raise DataError(f"each {what} must hold {dim} numbers (the index's dimension), got {got}")
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise DataError(
            f"{what} {row + 1} holds a value that is not a finite number (NaN, infinity, or beyond float32)"
        )
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64))
    if (norms == 0).any():
        raise DataError(f"{what} {int(np.flatnonzero(norms == 0)[0]) + 1} is all zeros; it has no direction to search")
    off = np.abs(norms - 1.0) > NORM_TOLERANCE
    if off.any():
        vectors = vectors.copy()  # never the caller's array
        vectors[off] = (vectors[off] / norms[off, None]).astype(np.float32)
    return CheckedVectors(np.ascontiguousarray(vectors), int(off.sum()))


def decoded_vector(text: str, number: int) -> np.ndarray:
    """The float32 values of item ``number``'s ``vector_b64`` (base64 of the little-endian float32 bytes,
    4 per value: ``base64.b64encode(vector.astype("<f4").tobytes())``), or a DataError naming the item."""
    try:
        raw = _strict_base64(text)
    except (binascii.Error, ValueError):
        raise DataError(f"item {number}: vector_b64 is not base64 text") from None
    if len(raw) % 4:
        raise DataError(f"item {number}: vector_b64 holds {len(raw)} bytes, not 4 per float32 value")
    return np.frombuffer(raw, dtype="<f4")


if sys.version_info >= (3, 11):

    def _strict_base64(text: str) -> bytes:
        """Only the base64 alphabet, padding at the end (``b64decode(validate=True)`` checks the same with a
        regular expression first: 3x slower on a 512-d vector)."""
        return binascii.a2b_base64(text, strict_mode=True)

else:  # pragma: no cover - Python 3.10

    def _strict_base64(text: str) -> bytes:
        return base64.b64decode(text, validate=True)


def check_model(model: str | None, index_model: str) -> None:
    """Nothing when ``model`` (a sha256 or its first ``MODEL_PREFIX``+ characters) names the index's model
    ``index_model`` or is None; else a ModelMismatchError naming both."""
    if model is None:
        return
    given = model.strip().lower()
    if len(given) < MODEL_PREFIX or not index_model.startswith(given):
        raise ModelMismatchError(
            f"these vectors are from model {model[:64]!r} but the index holds vectors of model "
            f"{index_model[:MODEL_PREFIX]} ({index_model}); embed them with the index's model "
            f"(at least {MODEL_PREFIX} characters of its sha256 name it)"
        )


def vector_records(
    count: int,
    *,
    labels: Sequence[str] | str = DEFAULT_LABEL,
    keys: Sequence[str | None] | None = None,
    metadata: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
) -> list[ImageRecord]:
    """Records of ``count`` vectors (no image: ``VECTOR_PATH``): one label per vector or one for all, keys
    and metadata per vector (metadata may be one mapping for all); a count that does not fit is a DataError."""
    labels = [labels] if isinstance(labels, str) else list(labels)
    labels = labels * count if len(labels) == 1 else labels
    keys = list(keys) if keys is not None else [None] * count
    extra = [dict(metadata or {})] * count if metadata is None or isinstance(metadata, Mapping) else list(metadata)
    for name, given in (("labels", labels), ("keys", keys), ("metadata", extra)):
        if len(given) != count:
            raise DataError(f"got {len(given)} {name} for {count} vectors; give one per vector")
    return [
        _record(number, label, key, more)
        for number, (label, key, more) in enumerate(zip(labels, keys, extra, strict=True), start=1)
    ]


def _record(number: int, label: str, key: str | None, metadata: Mapping[str, Any]) -> ImageRecord:
    """The record of vector ``number``; a bad label, key or metadata is a DataError naming the item."""
    label = label.strip() if isinstance(label, str) else label
    if (problem := label_problem(label)) is not None:
        raise DataError(f"item {number}: the label {problem}")
    if key is not None and (problem := key_problem(key)) is not None:
        raise DataError(f"item {number}: the key {problem}")
    checked = check_metadata(dict(metadata), f"item {number}: metadata")
    return ImageRecord(path=VECTOR_PATH, label=label, metadata=checked, key=key)


def normalised_warning(normalised: int, count: int) -> list[str]:
    """The sentence that says vectors were normalised (none when all came normalised)."""
    if not normalised:
        return []
    return [
        f"{normalised} of the {count} vectors were not L2-normalised (norm off by more than "
        f"{NORM_TOLERANCE:g}); they were normalised before use"
    ]


def read_vector_file(path: Path) -> np.ndarray:
    """The vectors of a ``.npy`` file (one vector, or one per row), or a DataError saying what is wrong."""
    try:
        values = np.load(Path(path), allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"there is no vector file {path}") from None
    except (OSError, ValueError) as error:
        raise DataError(f"cannot read {path} as a .npy array of vectors ({error})") from None
    if values.ndim not in (1, 2) or not np.issubdtype(values.dtype, np.number):
        raise DataError(f"{path} holds a {values.ndim}-d {values.dtype} array; save one vector or one per row")
    return values
