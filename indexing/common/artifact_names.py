"""File and folder names of the on-disk artifacts that stages hand to each other.

One table, so that a training run, an export, an index directory and a CSV dataset never
disagree about a name (docs/CONTRACTS.md describes each artifact).
"""

from __future__ import annotations

# An exported model (``retrieval export``): ONNX graph + its manifest.
MODEL_ONNX_NAME = "model.onnx"
MODEL_MANIFEST_NAME = "model.json"

# A training run directory: its resolved config, and where it keeps its checkpoints and its export.
RUN_CONFIG_NAME = "config.yaml"
RUN_CHECKPOINTS_SUBDIR = "checkpoints"
RUN_BEST_CHECKPOINT_NAME = "best.pt"
RUN_EXPORT_SUBDIR = "export"
# An ensemble run (``retrieval train --ensemble L``) keeps its members' run directories in members/0..L-1.
ENSEMBLE_MEMBERS_SUBDIR = "members"

# An index directory.
INDEX_MANIFEST_NAME = "manifest.json"
INDEX_MODEL_SUBDIR = "model"  # a self-contained copy of the export the index was built with
FLOAT_INDEX_NAME = "float.faiss"
BINARY_INDEX_NAME = "binary.faiss"
EMBEDDINGS_NAME = "embeddings.f16.npy"
ITEMS_DB_NAME = "items.sqlite"
SEGMENTS_SUBDIR = "segments"  # append-only delta segments beside the base files (index_store)
RAW_VECTORS_SUBDIR = "raw"  # a DBA index's raw (not augmented) embeddings by item id (store/files/raw_vectors)
UPLOADS_SUBDIR = "uploads"  # images added through the service, named <sha256>.<format>
SNAPSHOT_MANIFEST_NAME = "snapshot.json"  # `retrieval index snapshot`: the sha256 of every file of the copy
# A shard directory (``retrieval index build --shard I/N``), combined by ``retrieval index merge``.
SHARD_MANIFEST_NAME = "shard.json"
SHARD_EMBEDDINGS_NAME = "embeddings.f32.npy"  # float32: the merge indexes exactly what one build would

# The CSV dataset layout.
CSV_MANIFEST_NAME = "manifest.csv"
