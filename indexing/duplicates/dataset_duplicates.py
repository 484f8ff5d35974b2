"""``retrieval data duplicates``: the exact and near copies in a dataset, found with an exported model.

Exact copies share their decoded pixels (``data.pixel_hash``); near copies are pairs whose embeddings
clear the copy threshold (``search.copy_join``: a self-join on the binary codes, re-checked in float) and
whose pixels agree (``search.copy_verifier``).
Each pair is told within a class, across classes, and across the class-disjoint split that
``retrieval train`` makes with the same ``--val-fraction`` / ``--val-fold`` (``eval.dataset_copies``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.duplicates.copy_join import DEFAULT_K, near_copy_pairs
from retrieval.indexing.duplicates.copy_thresholds import copy_thresholds
from retrieval.indexing.duplicates.copy_verifier import verify_copies
from retrieval.indexing.duplicates.dataset_copies import EXACT, NEAR, CopyPair, DatasetCopies
from retrieval.indexing.duplicates.pixel_hash import exact_copy_sets, pixel_digests
from retrieval.indexing.exported_model.embedding_files import DatasetEmbedding, embedding_table
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.indexing.search.binary import binarize

PathLike = str | Path
Data = PathLike | Sequence[ImageRecord]
"""A dataset: any layout ``retrieval data`` reads, or a list of records (as ``usecases.inputs.Data``)."""

NO_SPLIT = ""


@dataclass(frozen=True)
class SplitSettings:
    """The split ``retrieval train`` would make (its ``--val-fraction``, ``--val-fold``, ``num_folds``)."""

    val_fraction: float = 0.2
    val_fold: int | None = None
    num_folds: int = 4


def find_dataset_duplicates(
    model: PathLike,
    data: Data,
    *,
    threshold: float | None = None,
    split: SplitSettings = SplitSettings(),
    k: int = DEFAULT_K,
    verify: bool = True,
    progress: bool = True,
) -> DatasetCopies:
    """The copies among ``data``'s images by ``model`` (an export or run directory) at ``threshold``
    (default: the one its ``model.json`` measured), the near candidates checked on their pixels
    (``search.copy_verifier``) unless ``verify`` is False. A DataError when fewer than two images are given."""
    records = _records(data)
    embedder = OnnxEmbedder(resolve_export_dir(Path(model)))
    embedded = embedding_table(embedder, records, progress=progress)
    return embedded_copies(
        records, embedded, embedder.manifest, threshold=threshold, split=split, k=k, verify=verify, progress=progress
    )


def embedded_copies(
    records: list[ImageRecord],
    embedded: DatasetEmbedding,
    manifest: ModelManifest,
    *,
    threshold: float | None = None,
    split: SplitSettings = SplitSettings(),
    k: int = DEFAULT_K,
    verify: bool = True,
    progress: bool = True,
) -> DatasetCopies:
    """``find_dataset_duplicates`` of ``records`` already embedded by the model of ``manifest`` (what
    ``retrieval data audit`` reuses, so that it embeds once)."""
    thresholds = copy_thresholds(manifest.duplicates, threshold, verify=verify)
    splits = split_names(records, split)
    exact = dict.fromkeys(_exact_pairs(records, progress), 1.0)
    table = embedded.table
    near = near_copy_pairs(
        binarize(table.embeddings, manifest.binarization_threshold),
        table.embeddings.shape[1],
        thresholds.binary,
        embeddings=table.embeddings,
        float_threshold=thresholds.cosine,
        k=k,
        progress=progress,
    )
    checked = ""
    if thresholds.pixel is not None:
        verified = verify_copies(near, [records[i].path for i in table.ids], thresholds.pixel, progress=progress)
        near, checked = verified.pairs, verified.summary()
    scores = {
        (min(table.ids[a], table.ids[b]), max(table.ids[a], table.ids[b])): float(s)
        for a, b, s in zip(near.first, near.second, near.score)
    }
    pairs = [
        CopyPair(a, b, score, EXACT if (a, b) in exact else NEAR, splits[a], splits[b])
        for (a, b), score in sorted((scores | exact).items(), key=lambda item: (-item[1], item[0]))
    ]
    return DatasetCopies(records, pairs, thresholds, embedded.failures, checked)


def find_exact_copies(data: Data, *, split: SplitSettings = SplitSettings(), progress: bool = True) -> DatasetCopies:
    """The exact copies among ``data``'s images alone (same decoded pixels; no model): what ``retrieval data
    check`` counts."""
    records = _records(data)
    splits = split_names(records, split)
    pairs = [CopyPair(a, b, 1.0, EXACT, splits[a], splits[b]) for a, b in _exact_pairs(records, progress)]
    return DatasetCopies(records, pairs, None)


def _records(data: Data) -> list[ImageRecord]:
    records = load_records(Path(data)) if isinstance(data, str | Path) else list(data)
    if len(records) < 2:
        named = data if isinstance(data, str | Path) else "the given records"
        raise DataError(f"finding copies needs two images or more; {named} holds {len(records)}")
    return records


def _exact_pairs(records: list[ImageRecord], progress: bool) -> list[tuple[int, int]]:
    digests = pixel_digests([record.path for record in records], progress=progress)
    return [pair for members in exact_copy_sets(digests) for pair in combinations(members, 2)]


def split_names(records: list[ImageRecord], settings: SplitSettings) -> list[str]:
    """Each record's split (train, val or test) under ``settings``; empty names when the data cannot be split."""
    try:
        splits = split_records(
            records, val_fraction=settings.val_fraction, val_fold=settings.val_fold, num_folds=settings.num_folds
        )
    except DataError:
        return [NO_SPLIT] * len(records)
    name = {id(r): part for part in ("train", "val", "test") for r in getattr(splits, part)}
    return [name.get(id(record), NO_SPLIT) for record in records]
