"""The vectors of bench_examples.py: a dataset's validation and test splits embedded with the project's
training-free model (EfficientNet-Lite0's ImageNet features, centred and rotated: ``pretrained_export``, the
model ``retrieval data duplicates`` uses), cached under ``$TMPDIR/retrieval_examples/`` so a rerun embeds nothing.

"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Split:
    """L2-normalised float32 embeddings of one split and their class labels (integers)."""

    embeddings: np.ndarray
    labels: np.ndarray


def cache_dir() -> Path:
    return Path(tempfile.gettempdir()) / "retrieval_examples"


def split_vectors(data: Path, split: str) -> Split:
    """``split`` (val or test) of ``data``, embedded once and then read from the cache."""
    cached = cache_dir() / f"{data.name}_{split}.npz"
    if not cached.exists():
        from retrieval.indexing.usecases.embedding import dataset_embeddings
        from retrieval.training.export.pretrained_export import pretrained_export

        model = pretrained_export(cache_dir() / f"{data.name}_model", data)
        table = dataset_embeddings(model, data, split=split, progress=False).table
        names = sorted(set(table.labels))
        labels = np.array([names.index(label) for label in table.labels], dtype=np.int64)
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cached, embeddings=table.embeddings.astype(np.float32), labels=labels)
    stored = np.load(cached)
    vectors = stored["embeddings"] / np.linalg.norm(stored["embeddings"], axis=1, keepdims=True)
    return Split(vectors.astype(np.float32), stored["labels"])
