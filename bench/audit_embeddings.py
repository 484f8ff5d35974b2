"""The embeddings ``bench_label_audit.py`` scores: a dataset embedded with the model ``retrieval data duplicates``
and ``retrieval data audit`` use by default (EfficientNet-Lite0's ImageNet weights, centred on the dataset:
``training.export.pretrained_export``), cached under ``$TMPDIR/label_audit_cache`` so reruns are cheap.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CACHE = Path(tempfile.gettempdir()) / "label_audit_cache"


@dataclass(frozen=True)
class Embedded:
    """Row i of ``vectors`` is the image ``paths[i]`` of class ``labels[i]`` (its split: ``splits[i]``)."""

    vectors: np.ndarray
    labels: np.ndarray
    paths: np.ndarray
    splits: np.ndarray

    def part(self, split: str) -> Embedded:
        keep = self.splits == split
        return Embedded(self.vectors[keep], self.labels[keep], self.paths[keep], self.splits[keep])


def embedded(
    data: Path, model_of: Path | None = None, limit: int | None = None, training_only: bool = False
) -> Embedded:
    """``data`` embedded with the default model of ``model_of`` (default: ``data`` itself), at most ``limit``
    images (a seeded sample), of its training classes alone when ``training_only``; cached."""
    model_of = Path(model_of or data).resolve()
    data = Path(data).resolve()
    name = f"{data.name}_by_{model_of.name}_{limit or 'all'}{'_training' if training_only else ''}"
    cached = CACHE / f"{name}.npz"
    whole = CACHE / f"{data.name}_by_{model_of.name}_{limit or 'all'}.npz"
    if training_only and whole.exists() and not cached.exists():
        everything = embedded(data, model_of, limit)
        keep = np.isin(everything.splits, ["train", "val"])
        return Embedded(
            everything.vectors[keep], everything.labels[keep], everything.paths[keep], everything.splits[keep]
        )
    if cached.exists():
        stored = np.load(cached)
        return Embedded(stored["vectors"], stored["labels"], stored["paths"], stored["splits"])
    from retrieval.indexing.data.sources import load_records
    from retrieval.indexing.data.splits import split_records
    from retrieval.indexing.usecases import dataset_embeddings
    from retrieval.training.export.pretrained_export import pretrained_export

    model = pretrained_export(CACHE / f"model_{model_of.name}", model_of)
    records = load_records(data)
    splits = split_records(records)
    split_by_path = {str(r.path): part for part in ("train", "val", "test") for r in getattr(splits, part)}
    if training_only:
        records = [r for r in records if split_by_path.get(str(r.path)) in ("train", "val")]
    if limit is not None and limit < len(records):
        picked = np.random.default_rng(0).choice(len(records), limit, replace=False)
        records = [records[i] for i in sorted(picked)]
    table = dataset_embeddings(model, records).table
    result = Embedded(
        table.embeddings.astype(np.float32),
        np.array(table.labels),
        np.array(table.paths),
        np.array([split_by_path.get(p, "") for p in table.paths]),
    )
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(cached, vectors=result.vectors, labels=result.labels, paths=result.paths, splits=result.splits)
    return result
