"""``retrieval index verify INDEX``: check every file, id, vector and record of a files index; the first
problem is an ``IndexFormatError`` naming it (the command exits non-zero with it).

In order: the manifest; the item table (SQLite's ``integrity_check``) and its generation against the
manifest's; the manifest's item and label counts against the item table, and its fields against the
sha256 it recorded of them (``manifest_edit_problem``); the model copy (``model_check``: it loads, its preprocessing fits the graph's input, and
its model.onnx and model.json are what the index was built with); the sha256 of every file listed in
``snapshot.json`` (a snapshot, or an index restored from one, while it is still at the snapshot's
generation), or else of every file the manifest recorded when it was written (``file_checksums``; an
index written by an older version has none: a note says so); every segment's files (each live item
in its segment's two faiss indexes, each item in exactly one segment); every stored vector (finite,
unit length for a normalised model, and equal to what the flat faiss indexes hold: float values, and
sign codes); every record (readable UTF-8 and JSON, a label, a metadata object, and for images added
through the service their file, whose name is its sha256); with ``deep``, a sample of stored images
embedded again against their stored vectors. Images outside the index directory (a gallery indexed
from a dataset) are not part of it: missing ones are reported, not failed. A file that cannot be read
at all is a finding that names it, never a traceback.
"""

from __future__ import annotations

import json
import re
import sqlite3
import tokenize
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from retrieval.indexing.common.artifact_names import (
    ITEMS_DB_NAME,
    SNAPSHOT_MANIFEST_NAME,
    UPLOADS_SUBDIR,
)
from retrieval.indexing.common.directory_moves import leftover_discards
from retrieval.indexing.common.errors import ConfigError, IndexFormatError
from retrieval.indexing.data.records import is_blank_label
from retrieval.indexing.exported_model.model_manifest import file_sha256
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.files.segment_storage.segment_set import SegmentSet, load_segment_set
from retrieval.indexing.store.files.segment_storage.segments import Segment
from retrieval.indexing.store.maintenance.model_check import DEEP_SAMPLE, model_copy_problem, reembedding_problem
from retrieval.indexing.store.shared.index_directory.file_checksums import checksum_problem
from retrieval.indexing.store.shared.index_directory.index_manifest import (
    IndexManifest,
    load_index_manifest,
    manifest_edit_problem,
)
from retrieval.indexing.store.shared.items.item_paths import added_by_vector
from retrieval.indexing.store.shared.items.items_db import ItemsDb

CHUNK = 65_536  # vectors compared at once
FLOAT_TOLERANCE = 2e-3  # float16 storage of unit vectors: |error| <= 2^-11 per component
NORM_TOLERANCE = 1e-2
LISTED_MISSING = 5
_SHA256_NAME = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class VerifyReport:
    """What ``verify_index`` checked; ``missing_images`` are gallery files outside the index that are gone."""

    index_dir: Path
    generation: int
    items: int = 0
    vectors: int = 0
    hashed_files: int = 0
    uploads: int = 0
    missing_images: list[str] = field(default_factory=list)
    missing_count: int = 0
    vector_items: int = 0  # items added by their vector: no image file, nothing missing
    notes: list[str] = field(default_factory=list)


def verify_index(index_dir: Path, *, deep: bool = False, sample: int = DEEP_SAMPLE) -> VerifyReport:
    """Check ``index_dir`` (see the module); raises IndexFormatError with the first problem found. ``deep``
    also embeds up to ``sample`` stored images again and compares them with their stored vectors."""
    index_dir = Path(index_dir)
    manifest = load_index_manifest(index_dir)
    if manifest.backend != "files":
        raise ConfigError(f"{index_dir} keeps its items in Milvus; verify checks indexes of the files backend")
    report = VerifyReport(index_dir, manifest.generation)
    for leftover in leftover_discards(index_dir):  # the dead ones were deleted when the manifest was read
        report.notes.append(f"{leftover} is a generation put aside by a switch that is still running")
    _check_item_table(index_dir / ITEMS_DB_NAME)
    db = ItemsDb.open(index_dir / ITEMS_DB_NAME)
    try:
        if db.generation != manifest.generation:
            _fail(
                index_dir,
                f"items.sqlite is at generation {db.generation} but manifest.json at {manifest.generation}: an update "
                "was interrupted after its commit; open the index once (`retrieval index info`) to finish it",
            )
        _check_manifest_figures(index_dir, manifest, db)
        _fail_on(index_dir, manifest_edit_problem(index_dir))
        _fail_on(index_dir, model_copy_problem(index_dir, manifest, report.notes))
        _check_hashes(index_dir, manifest, report)
        with _reading(index_dir, "the segment files (embeddings and faiss indexes)"):
            segments, stale = load_segment_set(index_dir, manifest, db)
        if stale:
            names = ", ".join(segments.segments[p].info.name or "the base" for p in stale)
            _fail(index_dir, f"the faiss indexes of segment {names} miss items; open the index once to repair them")
        _check_ids(index_dir, segments, db.count)
        report.vectors = sum(_check_vectors(index_dir, manifest, segments, s) for s in segments.segments)
        _check_readable_records(index_dir / ITEMS_DB_NAME)
        with _reading(index_dir, ITEMS_DB_NAME):
            _check_records(index_dir, db, report)
        if deep:
            _fail_on(index_dir, reembedding_problem(index_dir, manifest, db, segments, report.notes, sample))
    finally:
        db.close()
    return report


def _check_manifest_figures(index_dir: Path, manifest: IndexManifest, db: ItemsDb) -> None:
    """The manifest's item and label counts against the item table (what ``index info`` shows against what
    the service and ``/items`` count)."""
    if manifest.count != db.count:
        _fail(index_dir, f"manifest.json says {manifest.count} items but {ITEMS_DB_NAME} holds {db.count}")
    if manifest.num_labels != (labels := len(db.labels())):
        _fail(index_dir, f"manifest.json says {manifest.num_labels} labels but {ITEMS_DB_NAME} holds {labels}")


def _fail(index_dir: Path, problem: str) -> None:
    raise IndexFormatError(f"{index_dir}: {problem}")


def _fail_on(index_dir: Path, problem: str | None) -> None:
    if problem:
        _fail(index_dir, problem)


_UNREADABLE = (sqlite3.Error, ValueError, SyntaxError, tokenize.TokenError, RuntimeError, OSError, TypeError)


@contextmanager
def _reading(index_dir: Path, what: str) -> Iterator[None]:
    """A file that cannot be parsed at all is a finding naming ``what``, not a traceback."""
    try:
        yield
    except _UNREADABLE as error:
        _fail(index_dir, f"{what} cannot be read ({type(error).__name__}: {error})")


def _check_item_table(path: Path) -> None:
    if not path.is_file():
        _fail(path.parent, f"{ITEMS_DB_NAME} is missing")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        result = db.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.DatabaseError as error:
        result = str(error)
    finally:
        db.close()
    if result != "ok":
        _fail(path.parent, f"{ITEMS_DB_NAME} is corrupt ({result})")


def _check_hashes(index_dir: Path, manifest: IndexManifest, report: VerifyReport) -> None:
    """Against snapshot.json while it is of the index's generation, else against the manifest's checksums."""
    if not _check_snapshot_hashes(index_dir, manifest.generation, report):
        _check_manifest_hashes(index_dir, manifest, report)


def _check_manifest_hashes(index_dir: Path, manifest: IndexManifest, report: VerifyReport) -> None:
    if manifest.files is None:
        report.notes.append(
            "manifest.json records no file checksums (written by an older version): file hashes not checked; "
            "the next write of the index records them"
        )
        return
    problem = checksum_problem(index_dir, manifest.files)
    if problem:
        _fail(index_dir, problem)
    report.hashed_files = len(manifest.files)


def _check_snapshot_hashes(index_dir: Path, generation: int, report: VerifyReport) -> bool:
    """Whether snapshot.json applies (and every file matched it)."""
    path = index_dir / SNAPSHOT_MANIFEST_NAME
    if not path.is_file():
        return False
    try:
        recorded = json.loads(path.read_text())
        hashes, taken_at = dict(recorded["files"]), int(recorded["generation"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        _fail(index_dir, f"{SNAPSHOT_MANIFEST_NAME} is unreadable ({error})")
    if taken_at != generation:
        report.notes.append(
            f"snapshot.json is of generation {taken_at}, the index is at {generation}: checked against the "
            "manifest's checksums instead"
        )
        return False
    for relative, sha256 in sorted(hashes.items()):
        file = index_dir / relative
        if not file.is_file():
            _fail(index_dir, f"{relative} is missing (listed in {SNAPSHOT_MANIFEST_NAME})")
        if file_sha256(file) != sha256:
            _fail(index_dir, f"{relative} has changed: its sha256 differs from {SNAPSHOT_MANIFEST_NAME}'s")
    report.hashed_files = len(hashes)
    return True


def _check_ids(index_dir: Path, segments: SegmentSet, count: int) -> None:
    live = np.concatenate([segment.live_ids() for segment in segments.segments])
    if len(live) != count or len(np.unique(live)) != len(live) or not np.array_equal(np.sort(live), segments.ids):
        _fail(index_dir, f"the segments hold {len(live)} live ids for {count} items (an id in two segments, or lost)")


def _check_vectors(index_dir: Path, manifest: IndexManifest, segments: SegmentSet, segment: Segment) -> int:
    """Stored vectors of the segment's live items against the manifest and its flat faiss indexes (each
    faiss position holds an id; its stored vector is the embedding row items.sqlite gives that id)."""
    name = segment.info.name or "the base"
    live = segment.live_ids()
    stored_ids = faiss.vector_to_array(segment.float_index.id_map).astype(np.int64)
    binary_ids = faiss.vector_to_array(segment.binary_index.id_map).astype(np.int64)
    float_flat = segment.float_kind.name == "flat"
    binary_flat = segment.binary_kind.name == "flat" and np.array_equal(stored_ids, binary_ids)
    for start in range(0, len(stored_ids), CHUNK):
        positions = np.arange(start, min(start + CHUNK, len(stored_ids)))
        keep = np.isin(stored_ids[positions], live)
        if not keep.any():
            continue
        rows = segments.rows_of(stored_ids[positions][keep]) - segment.info.first_row
        expected = np.asarray(segment.embeddings[rows], dtype=np.float32)
        if not np.isfinite(expected).all():
            _fail(index_dir, f"segment {name} stores a vector that is not finite")
        norms = np.linalg.norm(expected, axis=1)
        if manifest.model.l2_normalized and np.abs(norms - 1).max(initial=0) > NORM_TOLERANCE:
            _fail(index_dir, f"segment {name} stores a vector of length {norms[np.abs(norms - 1).argmax()]:.3f}, not 1")
        if float_flat:
            held = _reconstruct_n(segment.float_index.index, int(start), len(positions))[keep]
            worst = np.abs(held - expected).max(initial=0)
            if worst > FLOAT_TOLERANCE:
                _fail(index_dir, f"segment {name}'s float index differs from its stored vectors (by {worst:.3g})")
        if binary_flat:
            _check_codes(index_dir, name, segment, expected, start, positions, keep, manifest.binarization_threshold)
    return len(live)


def _check_codes(
    index_dir: Path,
    name: str,
    segment: Segment,
    expected: np.ndarray,
    start: int,
    positions: np.ndarray,
    keep: np.ndarray,
    threshold: float,
) -> None:
    codes = _reconstruct_n(segment.binary_index.index, int(start), len(positions))[keep]
    differ = np.unpackbits(codes ^ binarize(expected, threshold), axis=1, bitorder="little")[:, : expected.shape[1]]
    near_threshold = np.abs(expected - threshold) < 2**-14  # float16 rounds these to the threshold
    if (differ.astype(bool) & ~near_threshold).any():
        _fail(index_dir, f"segment {name}'s binary index differs from the sign codes of its stored vectors")


def _reconstruct_n(index: Any, start: int, count: int) -> np.ndarray:
    """faiss's numpy ``reconstruct_n``: ``faiss.contrib.torch_utils`` (imported with pytorch-metric-learning)
    replaces it with one that returns torch tensors and keeps the original as ``reconstruct_n_numpy``."""
    return np.asarray(getattr(index, "reconstruct_n_numpy", index.reconstruct_n)(start, count))


def _check_readable_records(path: Path) -> None:
    """Every record's text is UTF-8 and its metadata JSON, read raw so that one bad byte names its item."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.text_factory = bytes
    try:
        for item_id, *texts in db.execute("SELECT id, path, label, metadata FROM items ORDER BY id"):
            problem = _unreadable_text(texts)
            if problem:
                _fail(path.parent, f"{ITEMS_DB_NAME} holds item {item_id} with {problem}")
    except sqlite3.Error as error:
        _fail(path.parent, f"{ITEMS_DB_NAME} cannot be read ({error})")
    finally:
        db.close()


def _unreadable_text(texts: list[bytes | None]) -> str | None:
    for name, value in zip(("a path", "a label", "metadata"), texts, strict=True):
        try:
            text = (value or b"").decode("utf-8") if isinstance(value, bytes) else str(value)
            if name == "metadata":
                json.loads(text)
        except UnicodeDecodeError:
            return f"{name} that is not UTF-8"
        except ValueError as error:
            return f"metadata that is not JSON ({error})"
    return None


def _check_records(index_dir: Path, db: ItemsDb, report: VerifyReport) -> None:
    uploads = (index_dir / UPLOADS_SUBDIR).resolve()
    for item in db.all_items():
        if is_blank_label(item.label) or not isinstance(item.metadata, dict):
            _fail(index_dir, f"item {item.id} has an empty label or metadata that is not a JSON object")
        path = Path(item.path)
        if path.resolve().parent == uploads:
            if not path.is_file():
                _fail(index_dir, f"the image of item {item.id} ({path.name}) is missing from {UPLOADS_SUBDIR}/")
            if _SHA256_NAME.match(path.stem) and file_sha256(path) != path.stem:
                _fail(index_dir, f"the image of item {item.id} ({path.name}) has changed: its sha256 is not its name")
            report.uploads += 1
        elif added_by_vector(path):
            report.vector_items += 1  # no image to miss
        elif not path.is_file():
            report.missing_count += 1
            if len(report.missing_images) < LISTED_MISSING:
                report.missing_images.append(f"item {item.id}: {path}")
        report.items += 1
