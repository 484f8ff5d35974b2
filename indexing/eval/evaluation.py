"""Offline evaluation: embed a dataset (or read an index) and measure float and binary retrieval.

The protocol comes from the records' flags, through ``metrics.evaluate_retrieval``: queries are
the ``is_query`` items, the gallery the ``is_gallery`` items, and an item that is both never
retrieves itself ("same-set" when every item is both). For an index whose kinds are approximate, the main
numbers are measured AS BUILT through the store's ``search`` and the exact numbers are
reported next to them, so the cost of the approximation is visible.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.metrics import (
    RetrievalMetrics,
    evaluate_retrieval,
    gallery_positions,
    metrics_from_neighbor_labels,
    relevant_counts,
    resolve_ks,
)
from retrieval.indexing.eval.retrieval_grid import GridRow
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder, embed_records
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.kinds import KindName, SearchKind
from retrieval.indexing.search.knn import Metric, iter_knn_chunks
from retrieval.indexing.store.shared.store_protocol import Store

KINDS: tuple[KindName, ...] = ("float", "binary")
_SEARCH_CHUNK = 1024


@dataclass
class EvalData:
    """One evaluation set: embeddings plus each item's label, path and protocol flags."""

    embeddings: np.ndarray
    labels: np.ndarray
    paths: list[str]
    is_query: np.ndarray
    is_gallery: np.ndarray
    ids: np.ndarray | None = None  # item ids when read from an index

    @property
    def protocol(self) -> str:
        return "same-set" if bool(np.all(self.is_query & self.is_gallery)) else "query-gallery"

    @classmethod
    def from_records(cls, records: Sequence[ImageRecord], embeddings: np.ndarray) -> EvalData:
        return cls(
            np.asarray(embeddings, np.float32),
            np.array([r.label for r in records]),
            [str(r.path) for r in records],
            np.array([r.is_query for r in records], bool),
            np.array([r.is_gallery for r in records], bool),
        )


@dataclass
class ReferenceRow:
    """Another embedding of the same items, measured under the same protocol next to the model's
    (``retrieval eval --model``: the backbone the model was trained from, see ``training.reference``)."""

    name: str  # "pretrained" or "untrained"
    metrics: dict[str, RetrievalMetrics]
    details: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, **{kind: self.metrics[kind].to_dict() for kind in KINDS}, **self.details}


@dataclass
class EvaluationReport:
    """Metrics per kind ("float", "binary") plus how they were measured."""

    metrics: dict[str, RetrievalMetrics]
    protocol: str
    num_queries: int
    num_gallery: int
    ks: tuple[int, ...]
    model_sha256: str
    source: str
    exact: dict[str, RetrievalMetrics] = field(default_factory=dict)
    details: dict[str, object] = field(default_factory=dict)
    reference: ReferenceRow | None = None
    whitened_reference: ReferenceRow | None = None  # the reference + the run's whitening stage, where it has one
    postprocess: dict[str, dict[str, RetrievalMetrics]] = field(default_factory=dict)  # eval --postprocess
    text_to_image: RetrievalMetrics | None = None  # a prompt per class searched by the text tower (text_to_image)

    @classmethod
    def of(
        cls,
        data: EvalData,
        metrics: dict[str, RetrievalMetrics],
        ks: tuple[int, ...],
        model_sha256: str,
        source: str,
        **extra: Any,
    ) -> EvaluationReport:
        """A report of ``metrics`` measured on ``data`` (protocol and set sizes read from its flags)."""
        counts = int(data.is_query.sum()), int(data.is_gallery.sum())
        return cls(metrics, data.protocol, *counts, ks, model_sha256, source, **extra)

    @property
    def left_out_queries(self) -> int:
        """Queries measured by no metric: no other gallery image of their class (R = 0, docs/metrics.md)."""
        return self.num_queries - min(metrics.num_queries for metrics in self.metrics.values())

    def to_json(self) -> dict[str, object]:
        """The ``metrics.json`` document: top-level ``float`` and ``binary`` plus metadata."""
        document: dict[str, object] = {kind: self.metrics[kind].to_dict() for kind in KINDS}
        if self.exact:
            document["exact"] = {kind: self.exact[kind].to_dict() for kind in KINDS}
        if self.reference is not None:
            document["reference"] = self.reference.to_json()
        if self.whitened_reference is not None:
            document["reference_whitened"] = self.whitened_reference.to_json()
        if self.postprocess:
            document["postprocess"] = {
                method: {kind: metrics.to_dict() for kind, metrics in kinds.items()}
                for method, kinds in self.postprocess.items()
            }
        if self.text_to_image is not None:
            document["text_to_image"] = self.text_to_image.to_dict()
        document.update(
            protocol=self.protocol,
            num_queries=self.num_queries,
            num_gallery=self.num_gallery,
            ks=list(self.ks),
            model_sha256=self.model_sha256,
            source=self.source,
            **self.details,
        )
        return document


def exact_metrics(
    data: EvalData, ks: Sequence[int], *, threshold: float = 0.0, seed: int = 0, progress: bool = False
) -> dict[str, RetrievalMetrics]:
    """Exact float (inner product) and binary (Hamming) metrics of the set."""
    codes = binarize(data.embeddings, threshold)
    vectors: dict[str, tuple[np.ndarray, Metric]] = {"float": (data.embeddings, "ip"), "binary": (codes, "hamming")}
    return {
        kind: evaluate_retrieval(
            values, data.labels, data.is_query, data.is_gallery, ks=ks, metric=metric, seed=seed, progress=progress
        )
        for kind, (values, metric) in vectors.items()
    }


def evaluate_model(
    model_dir: Path,
    records: Sequence[ImageRecord],
    *,
    ks: Sequence[int] | None = None,
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = True,
    seed: int = 0,
) -> tuple[EvaluationReport, EvalData]:
    """Embed ``records`` with the model, then measure exact float and binary retrieval."""
    embedder = OnnxEmbedder(resolve_export_dir(model_dir), threads=threads)
    kept, embeddings, failures = embed_records(embedder, list(records), batch_size=batch_size, progress=progress)
    data = EvalData.from_records(kept, embeddings)
    chosen = resolve_ks(ks, data.labels[data.is_gallery])
    metrics = exact_metrics(
        data, chosen, threshold=embedder.manifest.binarization_threshold, seed=seed, progress=progress
    )
    report = EvaluationReport.of(data, metrics, chosen, embedder.model_sha256, "model")
    report.details["unreadable_images"] = len(failures)
    return report, data


def index_data(store: Store) -> EvalData:
    """The stored embeddings, labels and flags of every item of an index."""
    items = store.all_items()
    ids = np.array([item.id for item in items], dtype=np.int64)
    return EvalData(
        store.embeddings_of(ids),
        np.array([item.label for item in items]),
        [item.path for item in items],
        np.array([item.is_query for item in items], bool),
        np.array([item.is_gallery for item in items], bool),
        ids,
    )


def evaluate_index(
    store: Store, *, ks: Sequence[int] | None = None, progress: bool = True, seed: int = 0
) -> tuple[EvaluationReport, EvalData]:
    """Measure an index: exact metrics of its stored embeddings, and as-built ones for approximate kinds."""
    data = index_data(store)
    chosen = resolve_ks(ks, data.labels[data.is_gallery])
    manifest = store.manifest
    exact = exact_metrics(data, chosen, threshold=manifest.binarization_threshold, seed=seed, progress=progress)
    approximate = {kind: not store.is_exact(SearchKind(kind)) for kind in KINDS}
    metrics: dict[str, RetrievalMetrics] = {
        kind: dataclasses.replace(as_built_metrics(store, data, chosen, kind), nmi=exact[kind].nmi)
        if approximate[kind]
        else exact[kind]
        for kind in KINDS
    }
    report = EvaluationReport.of(
        data,
        metrics,
        chosen,
        manifest.model_sha256,
        "index",
        exact=exact if any(approximate.values()) else {},
        details={
            "float_kind": manifest.float_kind,
            "binary_kind": manifest.binary_kind,
            "index_dir": str(store.index_dir),
        },
    )
    return report, data


def as_built_metrics(store: Store, data: EvalData, ks: Sequence[int], kind: KindName) -> RetrievalMetrics:
    """Metrics of what ``store.search`` returns, under the same protocol as ``evaluate_retrieval``:
    per query, the first k results that are gallery items other than itself."""
    _, codes = np.unique(data.labels, return_inverse=True)
    queries, gallery = np.flatnonzero(data.is_query), np.flatnonzero(data.is_gallery)
    relevant = relevant_counts(codes[queries], codes[gallery], gallery_positions(queries, gallery))
    k = int(min(max(relevant.max(initial=0), max(ks)), len(gallery)))
    rows = []
    for start in range(0, len(queries), _SEARCH_CHUNK):
        chunk = queries[start : start + _SEARCH_CHUNK]
        positions, valid = gallery_hits_widening(store, data, chunk, k, kind)
        rows.append(np.where(valid, codes[positions], -1))
    return metrics_from_neighbor_labels(np.concatenate(rows), codes[queries], relevant, ks)


def gallery_hits_widening(
    store: Store, data: EvalData, chunk: np.ndarray, k: int, kind: KindName
) -> tuple[np.ndarray, np.ndarray]:
    """The first k gallery hits (self excluded) of each query in ``chunk``, searching wider until every
    row has k of them or the whole index was asked for: non-gallery items never crowd out gallery ones."""
    share = max(int(data.is_gallery.sum()), 1) / max(store.count, 1)
    fetch = min(store.count, math.ceil((k + 1) / share) + 1)
    positions, valid = first_gallery_hits(store.search(data.embeddings[chunk], fetch, kind=kind).ids, chunk, data, k)
    while fetch < store.count:
        short = np.flatnonzero(valid.sum(axis=1) < k)
        if len(short) == 0:
            break
        fetch = min(store.count, fetch * 2)
        found = store.search(data.embeddings[chunk[short]], fetch, kind=kind).ids
        positions[short], valid[short] = first_gallery_hits(found, chunk[short], data, k)
    return positions, valid


def first_gallery_hits(found: np.ndarray, own: np.ndarray, data: EvalData, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, valid) of the first k results per row that are gallery items other than ``own``."""
    if data.ids is None:
        raise ValueError("first_gallery_hits needs EvalData read from an index (with item ids)")
    positions = np.searchsorted(data.ids, found).clip(0, len(data.ids) - 1)
    keep = (found >= 0) & (data.ids[positions] == found) & data.is_gallery[positions] & (positions != own[:, None])
    order = np.argsort(~keep, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(positions, order, 1), np.take_along_axis(keep, order, 1)


def index_neighbors(store: Store, data: EvalData, query_positions: np.ndarray, k: int) -> np.ndarray:
    """Positions of the top-k float gallery results of the index AS BUILT (self excluded, -1 pads)."""
    positions, valid = gallery_hits_widening(store, data, query_positions, k, "float")
    return np.where(valid, positions, -1)


def exact_neighbors(data: EvalData, query_positions: np.ndarray, k: int) -> np.ndarray:
    """Positions of the top-k exact float gallery neighbours of some queries (self excluded)."""
    gallery = np.flatnonzero(data.is_gallery)
    own = gallery_positions(query_positions, gallery)
    chunks = iter_knn_chunks(data.embeddings[query_positions], data.embeddings[gallery], k, query_ids=own)
    ids = np.concatenate([results.ids for _, results in chunks])
    return np.where(ids >= 0, gallery[ids.clip(0)], -1)


def grid_queries(data: EvalData, count: int) -> np.ndarray:
    """``count`` query positions spread evenly over the queries (deterministic)."""
    queries = np.flatnonzero(data.is_query)
    if count <= 0 or len(queries) == 0:
        return np.empty(0, dtype=np.int64)
    return queries[np.unique(np.linspace(0, len(queries) - 1, min(count, len(queries))).astype(int))]


def grid_rows(data: EvalData, query_positions: np.ndarray, neighbors: np.ndarray) -> list[GridRow]:
    """Rows for ``retrieval_grid``: each query with its (path, label) neighbours and their cosine scores."""
    rows = []
    for q, row in zip(query_positions, neighbors):
        found = row[row >= 0]
        rows.append(
            GridRow(
                Path(data.paths[q]),
                str(data.labels[q]),
                [(Path(data.paths[n]), str(data.labels[n])) for n in found],
                scores=_cosine(data.embeddings[found], data.embeddings[q]).tolist(),
            )
        )
    return rows


def _cosine(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(query)
    return (vectors @ query) / np.maximum(norms, 1e-12)
