"""``manifest.json`` of an index directory: what was indexed, with which model, in which generation.

The manifest is written last by every build or update. Its ``generation`` must equal the
one committed in ``items.sqlite``; when it does not, an update was interrupted after the
item table committed and the faiss files are rebuilt on open (see ``index_store``). Reading the
manifest of a directory that a build killed between its two renames left missing puts the previous
index back first (``atomic_write.recover_swapped_out``), and a switch of generations killed between
its renames is finished (``directory_moves``), and what it had put aside for deletion is deleted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retrieval.indexing.common.artifact_names import INDEX_MANIFEST_NAME
from retrieval.indexing.common.atomic_write import atomic_write_text, recover_swapped_out
from retrieval.indexing.common.directory_moves import finish_moves, moves_journal, remove_stale_discards
from retrieval.indexing.common.errors import IndexFormatError
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.search.postprocess_params import IndexPostprocess
from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy
from retrieval.indexing.store.shared.index_directory.file_checksums import FileChecksum, record_checksums

INDEX_FORMAT_VERSION = 1
_log = logging.getLogger(__name__)


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


FAISS_DISTRIBUTIONS = ("faiss-cpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss-gpu", "faiss")


def installed_faiss_version() -> str:
    """The version of the installed faiss distribution (the ``cpu`` or ``gpu`` extra's), read from its metadata
    so that reading or writing a manifest does not import faiss (``retrieval serve --help`` stays light)."""
    for name in FAISS_DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


class IndexManifest(BaseModel):
    """Everything needed to trust and reopen an index directory."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    format_version: int = INDEX_FORMAT_VERSION
    model_sha256: str
    model: ModelManifest
    model_files_sha256: str | None = Field(
        None, description="sha256 of the model copy's model.onnx and model.json together (None: an older version)"
    )
    model_dir: str = Field(description="absolute export directory the index was built from")
    dim: int = Field(gt=0)
    bits: int = Field(gt=0, description="binary code length; equals dim (one sign bit per dimension)")
    binarization_threshold: float = 0.0
    float_kind: str
    binary_kind: str
    count: int = Field(ge=0, description="items currently searchable")
    num_labels: int = Field(ge=0)
    generation: int = Field(ge=0, description="must equal the generation committed in items.sqlite")
    created_at: str
    build_id: str = Field("", description="random id of the build; a rebuild of the same directory gets a new one")
    updated_at: str
    faiss_version: str = Field(default_factory=installed_faiss_version)
    delta_segments: int = Field(0, ge=0, description="append-only segments beside the base (segments/)")
    tombstones: int = Field(0, ge=0, description="removed items still stored in a segment until a compaction")
    compaction: CompactionPolicy = Field(default_factory=CompactionPolicy)
    backend: Literal["files", "milvus"] = Field(
        "files", description="files: faiss + SQLite in this directory; milvus: the items live in a Milvus collection"
    )
    milvus_uri: str | None = Field(None, description="milvus backend: server URL or milvus-lite .db file")
    milvus_collection: str | None = Field(None, description="milvus backend: the collection holding the items")
    files: dict[str, FileChecksum] | None = Field(
        None,
        description="files backend: the sha256 of every file when the manifest was written (None: an older version)",
    )
    postprocess: IndexPostprocess = Field(
        default_factory=IndexPostprocess,
        description="dba: the augmentation the stored vectors carry (None: raw); qe, kreciprocal: their search parameters",
    )
    manifest_sha256: str | None = Field(
        None,
        description="sha256 of every other field as written (``manifest_seal``), so that an edit of the manifest "
        "itself (count, num_labels, updated_at, postprocess, ...) is caught (None: an older version)",
    )


def manifest_path(index_dir: Path) -> Path:
    return Path(index_dir) / INDEX_MANIFEST_NAME


def load_index_manifest(index_dir: Path) -> IndexManifest:
    """Read ``manifest.json``; a missing or corrupt one is an IndexFormatError saying to rebuild."""
    path = manifest_path(index_dir)
    if finish_moves(moves_journal(Path(index_dir))):  # a model switch or rollback killed between its renames
        _log.warning("%s: finished the switch of generations that an interrupted command began", index_dir)
    for leaked in remove_stale_discards(Path(index_dir)):  # left by a switch of an older version, killed
        _log.warning("%s: deleted %s, a generation that an interrupted switch had put aside", index_dir, leaked.name)
    if recover_swapped_out(Path(index_dir)) is not None:  # a build killed between its two renames
        _log.warning("%s: put back the index that an interrupted build had moved aside", index_dir)
    if not Path(index_dir).is_dir():
        raise IndexFormatError(f"{index_dir} is not an index directory; create one with `retrieval index build`")
    if not path.is_file():
        raise IndexFormatError(
            f"{path} is missing; {index_dir} is not a complete index, rebuild it with `retrieval index build`"
        )
    try:
        manifest = IndexManifest.model_validate_json(path.read_bytes())
    except (ValidationError, ValueError, UnicodeDecodeError) as error:
        reason = str(error).splitlines()[0]
        raise IndexFormatError(
            f"{path} is corrupt ({reason}); rebuild the index with `retrieval index build`"
        ) from None
    if manifest.format_version != INDEX_FORMAT_VERSION:
        raise IndexFormatError(
            f"{path} has format version {manifest.format_version} but this version reads "
            f"{INDEX_FORMAT_VERSION}; rebuild the index with `retrieval index build`"
        )
    return manifest


def save_index_manifest(index_dir: Path, manifest: IndexManifest) -> IndexManifest:
    """Write ``manifest.json`` (a files index: with the checksum of every file, ``file_checksums``); the
    manifest as saved."""
    if manifest.backend == "files":
        manifest = manifest.model_copy(update={"files": record_checksums(Path(index_dir), manifest.files)})
    fields = manifest.model_dump(mode="json")
    fields["manifest_sha256"] = manifest_seal(fields)
    text = json.dumps(fields, indent=2, sort_keys=True) + "\n"
    manifest = manifest.model_copy(update={"manifest_sha256": fields["manifest_sha256"]})
    atomic_write_text(manifest_path(index_dir), text)
    return manifest


def manifest_seal(fields: dict[str, Any]) -> str:
    """The sha256 of a manifest's fields as written (its JSON object) less ``manifest_sha256`` itself. Made
    from the file's own fields, not from a parsed model, so a field a later version adds (with its default)
    does not change the seal of a manifest written before it."""
    written = {key: value for key, value in fields.items() if key != "manifest_sha256"}
    return hashlib.sha256(json.dumps(written, sort_keys=True).encode()).hexdigest()


def manifest_edit_problem(index_dir: Path) -> str | None:
    """Why ``INDEX/manifest.json`` cannot be trusted as written (edited after its writer saved it); None when
    its fields have the sha256 it recorded, or when it records none: a manifest of an older version has
    neither file checksums nor its own (``files`` absent), so it is checked only beside them."""
    try:
        fields = json.loads(manifest_path(index_dir).read_bytes())
    except (OSError, ValueError):
        return None  # load_index_manifest says what is wrong with such a file
    recorded = fields.get("manifest_sha256") if isinstance(fields, dict) else None
    if recorded is None or fields.get("files") is None or manifest_seal(fields) == recorded:
        return None
    return (
        "manifest.json has been edited since the index wrote it: its fields no longer have the sha256 it recorded "
        "(an edited count, num_labels, updated_at or postprocess misreports the index); restore it from a "
        "snapshot or rebuild the index"
    )


def check_model(manifest: IndexManifest, expected_model_sha256: str | None, *, force: bool = False) -> None:
    """Refuse to search an index built with another model than the query model, unless ``force``."""
    if expected_model_sha256 and expected_model_sha256 != manifest.model_sha256 and not force:
        raise IndexFormatError(
            f"index was built with model {manifest.model_sha256[:12]} but the query model is "
            f"{expected_model_sha256[:12]}; rebuild the index or pass --force"
        )
